import QoSMapCore
package import QoSMapYAML

/// Reads `classify.dns:` and a rule's `match: {dns: [...]}` (docs/DNS.md).
extension MarkingConfigReader {
    /// The keys of `classify.dns`.
    package static let dnsKeys = ["snoop", "max-addresses", "min-ttl", "max-ttl"]

    /// `classify.dns`.
    package mutating func dnsSettings(_ node: Node) -> DNSLearningSettings {
        var d = DNSLearningSettings()
        guard let pairs = mapping(node, "classify.dns", allowed: Self.dnsKeys) else { return d }
        var minNode: Node?
        for (_, v, k) in pairs {
            switch k {
            case "snoop":
                var names: [String] = []
                // `snoop: []` is no learning, as the default config writes it.
                let items: [Node] =
                    if case .sequence(let seq) = v, seq.isEmpty { [] } else { list(v, "interface names") }
                for item in items {
                    guard let s = yaml.scalar(item, "an interface name") else { continue }
                    guard !s.isEmpty, s.utf8.count <= 15, !s.contains("/"), !s.contains(" ") else {
                        yaml.error(
                            item, "invalid interface name '\(s)'; allowed: 1-15 bytes without '/' or spaces")
                        continue
                    }
                    if names.contains(s) {
                        yaml.error(
                            item, "duplicate interface '\(s)' in dns.snoop; allowed: each interface once")
                        continue
                    }
                    names.append(s)
                }
                d.snoop = names
            case "max-addresses":
                if let n = yaml.integer(v, "max-addresses", 1...DNSLearningSettings.maxAddressesLimit) {
                    d.maxAddresses = n
                }
            case "min-ttl":
                minNode = v
                if let n = yaml.integer(v, "min-ttl (seconds)", 0...Int(Int32.max)) { d.minTTL = UInt32(n) }
            default:  // max-ttl
                if let n = yaml.integer(v, "max-ttl (seconds)", 1...Int(Int32.max)) { d.maxTTL = UInt32(n) }
            }
        }
        if d.minTTL > d.maxTTL {
            yaml.error(
                minNode ?? node,
                "min-ttl \(d.minTTL) is above max-ttl \(d.maxTTL); allowed: min-ttl <= max-ttl")
        }
        return d
    }

    /// A rule's `dns:` patterns, sorted and deduplicated; `snoop` says whether
    /// `classify.dns.snoop` names any interface (else nothing is ever learned).
    mutating func dnsPatterns(_ node: Node, snoop: Bool) -> [DNSNamePattern] {
        var patterns: [DNSNamePattern] = []
        for item in list(node, "DNS name patterns") {
            guard let s = yaml.scalar(item, "a DNS name pattern") else { continue }
            do { patterns.append(try DNSNamePattern(parsing: s)) } catch {
                yaml.error(item, error.description)
            }
        }
        if !snoop {
            yaml.error(
                node,
                "dns: rule without dns.snoop interfaces: no address could ever be learned; allowed: classify: {dns: {snoop: [IFACE, ...]}}"
            )
        }
        return DNSNamePattern.normalized(patterns)
    }
}
