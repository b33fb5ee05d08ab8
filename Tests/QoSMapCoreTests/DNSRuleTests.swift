import QoSMapCore
import Testing

@Suite("dns: rules in the model and the classifier")
struct DNSRuleTests {
    static func pattern(_ s: String) -> DNSNamePattern { try! DNSNamePattern(parsing: s) }
    static func name(_ s: String) -> DNSName { pattern(s).name }

    static let patternPool = [
        "*.zoom.us", "zoom.us", "teams.microsoft.com", "*.example.net", "*.a.example.net",
    ]
    static let namePool = [
        "zoom.us", "eu01.zoom.us", "a.b.zoom.us", "teams.microsoft.com", "x.teams.microsoft.com",
        "example.net", "w.example.net", "x.a.example.net", "other.org",
    ]

    @Test(arguments: [
        ("*.zoom.us", "*.zoom.us", true), ("*.zoom.us", "*.eu.zoom.us", true),
        ("*.zoom.us", "a.zoom.us", true),
        ("*.zoom.us", "zoom.us", false), ("zoom.us", "*.zoom.us", false),
        ("*.eu.zoom.us", "*.zoom.us", false),
        ("a.zoom.us", "a.zoom.us", true), ("a.zoom.us", "b.zoom.us", false),
    ])
    func patternCovers(_ a: String, _ b: String, _ expected: Bool) {
        #expect(Self.pattern(a).covers(Self.pattern(b)) == expected)
    }

    /// Coverage is what lint's shadowing reads: a dns: rule never shadows a
    /// rule without dns:, and covers one whose patterns are all inside its own.
    @Test func shadowingWithDNS() {
        let p = Self.pattern
        let set = FlowRuleSet(rules: [
            FlowRule(name: "zoom", match: FlowMatch(dns: [p("*.zoom.us")]), action: .treatment(.bestEffort)),
            FlowRule(name: "all", match: FlowMatch(protocols: [17]), action: .treatment(.bestEffort)),
            FlowRule(name: "eu", match: FlowMatch(dns: [p("*.eu.zoom.us")]), action: .treatment(.bestEffort)),
            FlowRule(name: "apex", match: FlowMatch(dns: [p("zoom.us")]), action: .treatment(.bestEffort)),
            FlowRule(name: "any", match: FlowMatch(), action: .treatment(.bestEffort)),
            FlowRule(name: "late", match: FlowMatch(dns: [p("x.org")]), action: .treatment(.bestEffort)),
        ])
        let shadowed = set.shadowed().map { "\(set.rules[$0.rule].name)<\(set.rules[$0.by].name)" }
        #expect(shadowed == ["eu<zoom", "late<any"])
    }

    @Test func listsAreNormalizedIntoGroups() {
        let p = Self.pattern
        let set = FlowRuleSet(rules: [
            FlowRule(
                name: "a", match: FlowMatch(dns: [p("b.org"), p("a.org")]), action: .treatment(.bestEffort)),
            FlowRule(
                name: "b", match: FlowMatch(protocols: [6], dns: [p("a.org"), p("b.org"), p("A.org")]),
                action: .treatment(.bestEffort)),
            FlowRule(name: "c", match: FlowMatch(dns: [p("c.org")]), action: .treatment(.bestEffort)),
        ])
        #expect(set.dnsGroups.map { $0.map(\.description) } == [["a.org", "b.org"], ["c.org"]])
    }

    /// The compiled dns field (group mask → class) agrees with the reference
    /// scan (destination names matched against each rule's patterns).
    @Test(arguments: [11, 12, 13, 14, 15, 16])
    func compiledEqualsReference(seed: UInt64) throws {
        var g = SplitMix(state: seed)
        var set = FlowClassifierTests.randomRules(&g, count: 1 + g.below(30))
        for i in set.rules.indices where g.chance(40) {
            set.rules[i].match.dns = DNSNamePattern.normalized(
                (0...g.below(2)).map { _ in Self.pattern(Self.patternPool[g.below(Self.patternPool.count)]) })
        }
        let c = try FlowClassifier(set)
        #expect(c.dnsGroups == set.dnsGroups)
        var matched = 0
        var dnsMatched = 0
        for _ in 0..<4000 {
            var p = FlowClassifierTests.randomPacket(&g)
            p.destinationNames = (0..<g.below(3)).map { _ in
                Self.name(Self.namePool[g.below(Self.namePool.count)])
            }
            let want = set.firstMatch(p)
            #expect(c.classify(p) == want, "packet \(p)")
            if let want {
                matched += 1
                if set.rules[want].match.dns != nil { dnsMatched += 1 }
            }
        }
        #expect(matched > 100)
        if set.hasDNSRules { #expect(dnsMatched > 0) }
    }

    @Test func tooManyGroupsAreRefused() {
        let rules = (0...FlowClassifier.maxDNSGroups).map { i in
            FlowRule(
                name: "r\(i)", match: FlowMatch(dns: [Self.pattern("n\(i).example")]),
                action: .treatment(.bestEffort))
        }
        #expect(throws: FlowRuleError.self) { try FlowClassifier(FlowRuleSet(rules: rules)) }
        #expect(throws: Never.self) { try FlowClassifier(FlowRuleSet(rules: Array(rules.dropLast()))) }
    }

    @Test(arguments: [
        (0, 60, 86400, 60), (30, 60, 86400, 60), (300, 60, 86400, 300), (99999, 60, 3600, 3600),
    ])
    func lifetime(_ ttl: UInt32, _ minTTL: UInt32, _ maxTTL: UInt32, _ expected: UInt32) {
        #expect(DNSLearningSettings(minTTL: minTTL, maxTTL: maxTTL).lifetime(ttl: ttl) == expected)
    }
}
