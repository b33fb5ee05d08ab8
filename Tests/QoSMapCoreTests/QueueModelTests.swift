import QoSMapCore
import Testing

@Suite("Queue model: rates")
struct QueueModelRateTests {
    @Test(
        arguments: [
            ("20mbit", 20_000_000), ("100kbit", 100_000), ("1gbit", 1_000_000_000), ("1.5mbit", 1_500_000),
            ("500000bit", 500_000), ("8000", 8_000), ("2mbps", 16_000_000), ("3kbps", 24_000),
            ("1kibit", 1_024),
            ("1mibit", 1_048_576), ("2gibit", 2_147_483_648), ("1KiBps", 8_192), ("20Mbit", 20_000_000),
            ("1e6", 1_000_000), ("1.5e3kbit", 1_500_000), ("2.5E-3gbit", 2_500_000), ("0.3bit", 0),
            ("1.0000001mbit", 1_000_000), ("1tbit", 1_000_000_000_000), (".5kbit", 500),
        ] as [(String, UInt64)])
    func parsesAsTcDoes(token: String, bits: UInt64) throws {
        #expect(try Rate(parsing: token).bitsPerSecond == bits)
    }

    @Test(arguments: [
        "", "mbit", "20mbitt", "20 mbit", "-5mbit", "+5mbit", "0x10mbit", "inf", "nan", "20%", "1..5mbit",
        "mbit20",
        // strtod reads no exponent without digits, so "e" is left as the unit.
        "1e",
    ])
    func badTokensNameThemselvesAndTheUnits(token: String) {
        do {
            let rate = try Rate(parsing: token)
            Issue.record("'\(token)' parsed as \(rate)")
        } catch {
            #expect(error == .invalidRate(token))
            #expect(error.description.contains("'\(token)'"))
            #expect(error.description.contains("allowed:"))
            for unit in ["kbit", "mbit", "gbit", "mibit", "mbps"] {
                #expect(error.description.contains(unit))
            }
        }
    }

    @Test func aBareNumberIsRefusedWhereAUnitIsRequired() throws {
        #expect(throws: QueueConfigError.rateWithoutUnit("8000")) {
            try Rate(parsing: "8000", requiringUnit: true)
        }
        #expect(try Rate(parsing: "8000bit", requiringUnit: true).bitsPerSecond == 8_000)
        let message = QueueConfigError.rateWithoutUnit("8000").description
        #expect(message.hasPrefix("rate '8000' has no unit; allowed:"))
    }

    @Test func ratesPastUInt64AreRefused() {
        #expect(throws: QueueConfigError.rateTooLarge("99999999999tbit")) {
            try Rate(parsing: "99999999999tbit")
        }
        #expect(throws: QueueConfigError.rateTooLarge("123456789012345678901")) {
            try Rate(parsing: "123456789012345678901")
        }
    }

    @Test func printsInTheLargestExactUnitAndParsesBack() throws {
        #expect(Rate(bitsPerSecond: 20_000_000).description == "20mbit")
        #expect(Rate(bitsPerSecond: 1_500_000).description == "1500kbit")
        #expect(Rate(bitsPerSecond: 1_024).description == "1024bit")
        #expect(Rate(bitsPerSecond: 0).description == "0bit")
        var random = SplitMix(state: 38)
        for _ in 0..<2_000 {
            // Mostly round numbers, as configs have them, and some arbitrary ones.
            let bits: UInt64 =
                random.chance(50)
                ? UInt64(random.below(100_000)) * [1, 1_000, 1_000_000, 1_000_000_000][random.below(4)]
                : random.next() >> UInt64(random.below(64))
            let rate = Rate(bitsPerSecond: bits)
            #expect(try Rate(parsing: rate.description) == rate, "\(bits)")
        }
    }

    @Test func bytesAreWholeAndDropTheBitsBelowAByte() {
        #expect(Rate(bitsPerSecond: 20_000_007).bytesPerSecond == 2_500_000)
        #expect(Rate(bytesPerSecond: 2_500_000).bitsPerSecond == 20_000_000)
        #expect(Rate(bytesPerSecond: .max).bitsPerSecond == .max)
    }
}

@Suite("Queue model: config")
struct QueueModelConfigTests {
    let rate20 = Rate(bitsPerSecond: 20_000_000)

    @Test func defaultsAreTheIssues() throws {
        let config = try QueueConfig(rate: rate20)
        #expect(config.pqMaxPercent == 50)
        #expect(config.discipline == .htb)
        #expect(!config.replace)
        for serviceClass in [ServiceClass.cs7, .cs6, .ef] { #expect(config.scheduling[serviceClass] == .pq) }
        let weights: [ServiceClass: Int] = [.af4: 30, .af3: 25, .af2: 20, .af1: 15, .be: 10]
        for (serviceClass, weight) in weights {
            #expect(config.scheduling[serviceClass] == .wfq(weight: weight))
        }
        #expect(config.scheduling.count == ServiceClass.allCases.count)
    }

    @Test func classesNotGivenKeepTheirDefault() throws {
        let config = try QueueConfig(rate: rate20, scheduling: [(.ef, .wfq(weight: 50)), (.be, .pq)])
        #expect(config.scheduling[.ef] == .wfq(weight: 50))
        #expect(config.scheduling[.be] == .pq)
        #expect(config.scheduling[.af4] == .wfq(weight: 30))
        #expect(config.scheduling[.cs7] == .pq)
    }

    @Test(arguments: [0, 101, -1, 1_000])
    func weightsOutOfRangeAreRefused(weight: Int) {
        #expect(throws: QueueConfigError.weightOutOfRange(.af2, weight)) {
            try QueueConfig(rate: rate20, scheduling: [(.af2, .wfq(weight: weight))])
        }
        #expect(QueueConfigError.weightOutOfRange(.af2, weight).description.hasSuffix("allowed: 1-100"))
    }

    @Test func weightsAtTheBoundsAreTaken() throws {
        _ = try QueueConfig(rate: rate20, scheduling: [(.af2, .wfq(weight: 1)), (.af3, .wfq(weight: 100))])
    }

    @Test func aClassScheduledTwiceIsRefused() {
        #expect(throws: QueueConfigError.classScheduledTwice(.ef)) {
            try QueueConfig(rate: rate20, scheduling: [(.ef, .pq), (.ef, .wfq(weight: 5))])
        }
    }

    @Test(arguments: [0, 101, -5])
    func pqMaxOutOfRangeIsRefused(percent: Int) {
        #expect(throws: QueueConfigError.pqMaxOutOfRange("\(percent)%")) {
            try QueueConfig(rate: rate20, pqMaxPercent: percent)
        }
    }

    @Test func zeroRatesAreRefused() {
        #expect(throws: QueueConfigError.rateNotPositive(field: "rate")) {
            try QueueConfig(rate: Rate(bitsPerSecond: 0))
        }
        #expect(throws: QueueConfigError.rateNotPositive(field: "ingress-rate")) {
            try QueueConfig(rate: rate20, ingressRate: Rate(bitsPerSecond: 0))
        }
    }

    @Test(arguments: [("40%", 40), ("40", 40), ("1%", 1), ("100%", 100)])
    func percentagesParse(token: String, value: Int) throws {
        #expect(try QueueConfig.parsePercent(token) == value)
    }

    @Test(arguments: ["0%", "101%", "4o%", "40.5%", "", "%", "-4%", "40%%", "1000%"])
    func badPercentagesAreRefused(token: String) {
        #expect(throws: QueueConfigError.pqMaxOutOfRange(token)) { try QueueConfig.parsePercent(token) }
    }

    @Test func ingressHasAPlanOnlyWithAnIngressRate() throws {
        let egressOnly = try QueueConfig(rate: rate20)
        #expect(try egressOnly.htbPlan(.ingress) == nil)
        let both = try QueueConfig(rate: rate20, ingressRate: Rate(bitsPerSecond: 100_000_000))
        #expect(try both.htbPlan(.ingress)?.rate == Rate(bitsPerSecond: 100_000_000))
        #expect(try both.htbPlan(.egress)?.rate == rate20)
    }

    @Test func cakeNamesTheSettingsItIgnores() throws {
        let plain = try QueueConfig(rate: rate20, discipline: .cake(.diffserv8))
        #expect(plain.settingsCAKEIgnores.isEmpty)
        #expect(plain.cakePlan(.egress)?.diffserv == .diffserv8)
        let tuned = try QueueConfig(
            rate: rate20, scheduling: [(.ef, .wfq(weight: 3))], pqMaxPercent: 40,
            discipline: .cake(.diffserv4))
        #expect(tuned.settingsCAKEIgnores == ["scheduling", "pq-max"])
        #expect(try QueueConfig(rate: rate20).cakePlan(.egress) == nil)
    }
}

@Suite("Queue model: the HTB tree")
struct QueueModelHTBTests {
    /// A random complete scheduling: each class pq or wfq with a random weight.
    static func randomScheduling(_ random: inout SplitMix) -> [(ServiceClass, QueueScheduling)] {
        ServiceClass.allCases.map { serviceClass in
            (serviceClass, random.chance(35) ? .pq : .wfq(weight: 1 + random.below(100)))
        }
    }

    /// Every structural promise of the tree, checked against the config it
    /// came from.
    static func check(_ plan: HTBPlan, _ config: QueueConfig, _ label: String) {
        let r = config.rate.bytesPerSecond
        let byID = Dictionary(uniqueKeysWithValues: plan.classes.map { ($0.id, $0) })
        #expect(byID.count == plan.classes.count, "ids unique \(label)")
        #expect(Set(plan.classes.map(\.id.minor)).count == plan.classes.count, "minors unique \(label)")
        #expect(!plan.classes.contains { $0.id.minor == 0 }, "no class is the qdisc \(label)")
        // Parents come first, so the classes can be created in order.
        var seen: Set<TCHandle> = [plan.handle]
        for node in plan.classes {
            #expect(seen.contains(node.parent), "\(node.id)'s parent \(node.parent) before it \(label)")
            seen.insert(node.id)
            #expect(node.id.major == plan.handle.major)
            #expect(node.rate.bitsPerSecond % 8 == 0, "whole bytes \(label)")
            #expect(node.rate <= node.ceil, "\(node.id) rate <= ceil \(label)")
            if let parent = byID[node.parent] {
                #expect(node.ceil <= parent.ceil, "\(node.id) ceil <= parent's \(label)")
            }
            #expect(node.rate >= HTBPlan.minimumClassRate, "\(node.id) \(label)")
            #expect(HTBPlan.quantumRange.contains(node.quantum), "\(node.id) quantum \(label)")
        }
        let root = plan.classes.first { $0.role == .root }!
        #expect(root.rate.bytesPerSecond == r && root.ceil.bytesPerSecond == r, "\(label)")

        let pq = ServiceClass.allCases.filter { config.scheduling[$0] == .pq }
        let wfq = ServiceClass.allCases.compactMap { serviceClass -> (ServiceClass, UInt64)? in
            if case .wfq(let weight) = config.scheduling[serviceClass] {
                return (serviceClass, UInt64(weight))
            }
            return nil
        }
        let pqParent = plan.classes.first { $0.role == .pqParent }
        let wfqParent = plan.classes.first { $0.role == .wfqParent }
        #expect((pqParent != nil) == !pq.isEmpty && (wfqParent != nil) == !wfq.isEmpty, "\(label)")
        // The parents' rates sum to the rate.
        let p = pqParent?.rate.bytesPerSecond ?? 0
        let w = wfqParent?.rate.bytesPerSecond ?? 0
        #expect(p + w == r, "parents sum to the rate \(label)")
        #expect(plan.pqCap.bytesPerSecond == p)

        if let pqParent {
            // The cap: rate = ceil = pq-max of the rate (all of it without wfq).
            // The wfq classes keep enough for the smallest weight's share to be the least rate.
            let least = HTBPlan.minimumClassRate.bytesPerSecond
            let weights = wfq.map(\.1)
            let wfqLeast =
                weights.isEmpty ? 0 : (least * weights.reduce(0, +) + weights.min()! - 1) / weights.min()!
            let expected = wfq.isEmpty ? r : min(r * UInt64(config.pqMaxPercent) / 100, r - wfqLeast)
            #expect(
                pqParent.rate.bytesPerSecond == expected && pqParent.ceil == pqParent.rate, "pq cap \(label)")
            let leaves = pq.map { plan.leaf($0) }
            #expect(leaves.allSatisfy { $0.parent == pqParent.id && $0.ceil == pqParent.ceil }, "\(label)")
            #expect(leaves.map(\.rate.bytesPerSecond).reduce(0, +) <= p, "pq leaves within the cap \(label)")
            // Strict order: the higher class, the lower prio, 0, 1, 2 …
            let byRank = pq.sorted(by: >).map { plan.leaf($0).prio }
            #expect(byRank == (0..<UInt32(pq.count)).map { $0 }, "pq prios \(label)")
        }
        if let wfqParent {
            #expect(wfqParent.ceil.bytesPerSecond == r, "\(label)")
            let leaves = wfq.map { (plan.leaf($0.0), $0.1) }
            let sumWeights = wfq.map(\.1).reduce(0, +)
            #expect(leaves.map(\.0.rate.bytesPerSecond).reduce(0, +) == w, "wfq leaves sum to W \(label)")
            for (leaf, weight) in leaves {
                #expect(leaf.parent == wfqParent.id && leaf.ceil.bytesPerSecond == r, "\(label)")
                // Within one byte of the exact proportional share.
                let exact = Double(w) * Double(weight) / Double(sumWeights)
                #expect(abs(Double(leaf.rate.bytesPerSecond) - exact) < 1.0, "\(leaf.id) share \(label)")
                #expect(leaf.prio == UInt32(pq.count), "common lower prio \(label)")
                #expect(leaf.quantum >= HTBPlan.frameBytes, "\(label)")
            }
            for (a, wa) in leaves {
                for (b, wb) in leaves {
                    #expect(
                        UInt64(a.quantum) * wb == UInt64(b.quantum) * wa, "quanta follow weights \(label)")
                }
            }
        }
        // Every class reachable by its priority, none by the qdisc's own handle.
        for serviceClass in ServiceClass.allCases {
            let priority = plan.skbPriority(serviceClass)
            #expect(TCHandle(rawValue: priority) == plan.leaf(serviceClass).id, "\(label)")
            #expect(priority != plan.handle.rawValue, "\(label)")
        }
        #expect(plan.defaultClass == plan.leaf(.be).id, "\(label)")
    }

    @Test func theDefaultTreeAt20Mbit() throws {
        let config = try QueueConfig(rate: Rate(bitsPerSecond: 20_000_000))
        let plan = try #require(try config.htbPlan(.egress))
        Self.check(plan, config, "default")
        // 20 Mbit/s is 2.5 MB/s; half of it pq, the rest by weights (sum 100).
        let r: UInt64 = 20_000_000 / 8
        #expect(plan.pqCap.bytesPerSecond == r / 2)
        let weights: [ServiceClass: UInt64] = [.af4: 30, .af3: 25, .af2: 20, .af1: 15, .be: 10]
        for (serviceClass, weight) in weights {
            #expect(plan.leaf(serviceClass).rate.bytesPerSecond == r / 2 * weight / 100)
            #expect(plan.leaf(serviceClass).prio == 3)
        }
        #expect(plan.leaf(.cs7).prio == 0 && plan.leaf(.cs6).prio == 1 && plan.leaf(.ef).prio == 2)
        #expect(plan.leaf(.ef).rate.bytesPerSecond == r / 2 / 100)
        #expect(plan.skbPriority(.be) == 0x0001_0010 && plan.skbPriority(.cs7) == 0x0001_0017)
        #expect(plan.defaultClass.description == "1:10")
        #expect(plan.classes.count == 11)
    }

    @Test func randomConfigsKeepEveryPromise() throws {
        var random = SplitMix(state: 0x38)
        var checked = 0
        for _ in 0..<400 {
            let bits =
                UInt64(random.below(1_000_000) + 1) * [1_000, 1_000_000, 1_000_000_000][random.below(3)]
            let config: QueueConfig
            do {
                config = try QueueConfig(
                    rate: Rate(bitsPerSecond: bits), scheduling: Self.randomScheduling(&random),
                    pqMaxPercent: 1 + random.below(100))
            } catch QueueConfigError.rateTooLow {
                continue
            }
            Self.check(try #require(try config.htbPlan(.egress)), config, "\(bits)bit \(config.scheduling)")
            checked += 1
        }
        #expect(checked > 300)
    }

    @Test func allPQTakesTheWholeRateInClassOrder() throws {
        let config = try QueueConfig(
            rate: Rate(bitsPerSecond: 8_000_000), scheduling: ServiceClass.allCases.map { ($0, .pq) })
        let plan = try #require(try config.htbPlan(.egress))
        Self.check(plan, config, "all pq")
        #expect(plan.pqCap == plan.rate)
        #expect(!plan.classes.contains { $0.role == .wfqParent })
        #expect(ServiceClass.allCases.map { plan.leaf($0).prio } == [7, 6, 5, 4, 3, 2, 1, 0])
    }

    @Test func allWFQHasNoPQParent() throws {
        let config = try QueueConfig(
            rate: Rate(bitsPerSecond: 8_000_000),
            scheduling: ServiceClass.allCases.map { ($0, .wfq(weight: 10)) })
        let plan = try #require(try config.htbPlan(.egress))
        Self.check(plan, config, "all wfq")
        #expect(plan.pqCap.bitsPerSecond == 0)
        #expect(ServiceClass.allCases.allSatisfy { plan.leaf($0).prio == 0 })
    }

    @Test func pqMaxOf100LeavesTheWFQClassesTheirLeast() throws {
        let config = try QueueConfig(rate: Rate(bitsPerSecond: 8_000_000), pqMaxPercent: 100)
        let plan = try #require(try config.htbPlan(.egress))
        Self.check(plan, config, "pq-max 100")
        // Weights 30 … 10 sum to 100: BE's 10/100 of W must be 8 bytes, so W is 80.
        #expect(plan.pqCap.bytesPerSecond == 1_000_000 - 80)
        #expect(plan.leaf(.be).rate.bytesPerSecond == HTBPlan.minimumClassRate.bytesPerSecond)
    }

    @Test func aRateTooLowNamesTheLeastThatDoes() throws {
        do {
            _ = try QueueConfig(rate: Rate(bitsPerSecond: 800))
            Issue.record("800bit compiled")
        } catch QueueConfigError.rateTooLow(let field, let rate, let minimum) {
            #expect(field == "rate" && rate.bitsPerSecond == 800)
            _ = try QueueConfig(rate: minimum)
            #expect(throws: QueueConfigError.self) {
                try QueueConfig(rate: Rate(bytesPerSecond: minimum.bytesPerSecond - 1))
            }
            let message = QueueConfigError.rateTooLow(field: field, rate: rate, minimum: minimum).description
            #expect(
                message.contains("rate 800bit is too low") && message.hasSuffix("allowed: \(minimum) or more")
            )
        }
        #expect(throws: QueueConfigError.self) {
            try QueueConfig(rate: Rate(bitsPerSecond: 20_000_000), ingressRate: Rate(bitsPerSecond: 64))
        }
    }

    @Test func handlesPrintAsTcDoes() {
        #expect(TCHandle(major: 1, minor: 0x10).description == "1:10")
        #expect(TCHandle(major: 0x10, minor: 0).description == "10:")
        #expect(TCHandle(major: 0xffff, minor: 0xfff1).description == "ffff:fff1")
        #expect(TCHandle.root.description == "root")
        #expect(TCHandle(rawValue: 0x0001_0017).major == 1 && TCHandle(rawValue: 0x0001_0017).minor == 0x17)
    }

    @Test func leafQdiscHandlesAreUniqueAndNotTheHTBs() throws {
        let plan = try #require(try QueueConfig(rate: Rate(bitsPerSecond: 20_000_000)).htbPlan(.egress))
        let handles = ServiceClass.allCases.map { plan.leafQdiscHandle($0) }
        #expect(
            Set(handles).count == 8 && !handles.contains(plan.handle) && handles.allSatisfy { $0.minor == 0 })
    }
}

@Suite("Queue model: CAKE tins")
struct QueueModelCAKETests {
    // From net/sched/sch_cake.c: the tin orders and the diffserv4 table's
    // entries for each class's code point (CS0, AF11, AF21, AF31, AF41, EF,
    // CS6, CS7).
    static let normalOrder = [0, 1, 2, 3, 4, 5, 6, 7]
    static let bulkOrder = [1, 0, 2, 3]
    static let diffserv4OfCodePoint: [ServiceClass: Int] = [
        .be: 0, .af1: 0, .af2: 2, .af3: 2, .af4: 2, .ef: 3, .cs6: 3, .cs7: 3,
    ]

    /// The tin `cake_select_tin` picks for a priority, with the given order.
    static func kernelTin(_ priority: UInt32, handle: TCHandle, tins: Int, order: [Int]) -> Int? {
        let minor = Int(priority & 0xffff)
        guard priority >> 16 == UInt32(handle.major), minor > 0, minor <= tins else { return nil }
        return order[minor - 1]
    }

    @Test func diffserv8HasOneTinPerClassInClassOrder() {
        let plan = CAKEPlan(rate: Rate(bitsPerSecond: 20_000_000), diffserv: .diffserv8)
        let tins = ServiceClass.allCases.map { serviceClass -> Int? in
            plan.skbPriority(serviceClass).flatMap {
                Self.kernelTin($0, handle: plan.handle, tins: 8, order: Self.normalOrder)
            }
        }
        #expect(tins.allSatisfy { $0 != nil })
        #expect(
            ServiceClass.allCases.allSatisfy {
                Self.kernelTin(plan.skbPriority($0)!, handle: plan.handle, tins: 8, order: Self.normalOrder)
                    == plan.tin($0)
            })
        // Higher class, higher tin (CAKE's higher priority), every tin used once.
        #expect(
            tins.compactMap { $0 } == tins.compactMap { $0 }.sorted()
                && Set(tins.compactMap { $0 }).count == 8)
    }

    @Test func diffserv4GroupsAsCAKEsOwnTableDoes() {
        let plan = CAKEPlan(rate: Rate(bitsPerSecond: 20_000_000), diffserv: .diffserv4, major: 9)
        for serviceClass in ServiceClass.allCases {
            let priority = plan.skbPriority(serviceClass)!
            #expect(priority >> 16 == 9)
            #expect(
                Self.kernelTin(priority, handle: plan.handle, tins: 4, order: Self.bulkOrder)
                    == Self.diffserv4OfCodePoint[serviceClass])
        }
    }

    @Test func besteffortReadsNoPriority() {
        let plan = CAKEPlan(rate: Rate(bitsPerSecond: 20_000_000), diffserv: .besteffort)
        #expect(ServiceClass.allCases.allSatisfy { plan.skbPriority($0) == nil && plan.tin($0) == 0 })
        #expect(plan.tinCount == 1)
    }

    // The stats dump lists tin order[i] as its (i + 1)th entry, the same
    // tin that priority minor i + 1 selects: each entry is labelled by the
    // class whose priority names it, and a shared tin once.
    @Test func eachTinOfTheStatsDumpIsLabelledByTheClassQueuedInIt() {
        let ds8 = CAKEPlan(rate: Rate(bitsPerSecond: 20_000_000), diffserv: .diffserv8)
        #expect(ds8.tinLabels == [.be, .af1, .af2, .af3, .af4, .ef, .cs6, .cs7])
        for serviceClass in ServiceClass.allCases {
            let minor = Int(ds8.skbPriority(serviceClass)! & 0xffff)
            #expect(ds8.tinLabels[minor - 1] == serviceClass)
        }
        let ds4 = CAKEPlan(rate: Rate(bitsPerSecond: 20_000_000), diffserv: .diffserv4)
        // Bulk (dumped first), best effort, video, voice.
        #expect(ds4.tinLabels == [nil, .be, .af2, .ef])
        let one = CAKEPlan(rate: Rate(bitsPerSecond: 20_000_000), diffserv: .besteffort)
        #expect(one.tinLabels == [.be])
    }
}

@Suite("Queue model: leaves")
struct QueueModelLeafTests {
    @Test func theBestKindTheKernelHas() throws {
        let rate = Rate(bitsPerSecond: 20_000_000)
        let plan = try #require(try QueueConfig(rate: rate).htbPlan(.egress))
        let fifoOnly = plan.leaves(available: QdiscKinds(kinds: ["htb", "tbf", "pfifo", "bfifo"]))
        #expect(fifoOnly.values.allSatisfy { $0.kind == "bfifo" })
        // 100 ms of each leaf's ceil: the whole rate for wfq, the cap for pq.
        #expect(fifoOnly[.be] == .bfifo(limitBytes: UInt32(rate.bytesPerSecond / 10)))
        #expect(fifoOnly[.ef] == .bfifo(limitBytes: UInt32(plan.pqCap.bytesPerSecond / 10)))

        let debian = plan.leaves(available: [.htb, .fifo, .fqCodel, .gred, .cake])
        for serviceClass in ServiceClass.allCases {
            let isAF = [.af1, .af2, .af3, .af4].contains(serviceClass)
            #expect(debian[serviceClass]?.kind == (isAF ? "gred" : "fq_codel"), "\(serviceClass)")
        }
        let colorBlind = plan.leaves(available: [.fqCodel, .gred], colorAware: false)
        #expect(colorBlind.values.allSatisfy { $0.kind == "fq_codel" })
    }

    @Test func fifosHaveAFloorOfTenFrames() {
        #expect(LeafQueue.fifoLimit(drainRate: Rate(bitsPerSecond: 64_000)) == 10 * HTBPlan.frameBytes)
        #expect(LeafQueue.fifoLimit(drainRate: Rate(bitsPerSecond: 80_000_000)) == 1_000_000)
        #expect(LeafQueue.fifoLimit(drainRate: Rate(bitsPerSecond: .max)) == UInt32.max)
    }

    @Test func codelsTargetCoversAFrameAtLowRates() {
        let fast = FQCodelLeaf(drainRate: Rate(bitsPerSecond: 100_000_000))
        #expect(fast.targetMicroseconds == 5_000 && fast.intervalMicroseconds == 100_000 && fast.ecn)
        // 1 Mbit/s: a 1514-byte frame takes 12,112 µs; the target is 1.5 of that.
        let slow = FQCodelLeaf(drainRate: Rate(bitsPerSecond: 1_000_000))
        #expect(slow.targetMicroseconds == 12_112 * 3 / 2)
        #expect(slow.intervalMicroseconds == 100_000 + slow.targetMicroseconds - 5_000)
    }

    @Test func gredDropsRedFirst() {
        let gred = GREDLeaf(drainRate: Rate(bitsPerSecond: 20_000_000))
        #expect(gred.thresholds.map(\.color) == [.green, .yellow, .red])
        let t = gred.thresholds
        #expect(t[2].minBytes < t[1].minBytes && t[1].minBytes < t[0].minBytes)
        #expect(t[2].maxBytes < t[1].maxBytes && t[1].maxBytes < t[0].maxBytes)
        #expect(t.allSatisfy { $0.minBytes < $0.maxBytes && $0.maxBytes <= gred.limitBytes })
    }
}
