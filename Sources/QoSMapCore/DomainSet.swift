/// Why a domain name could not be resolved or registered.
public enum DomainSetError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No domain has that name.
    case unknown(name: String, known: [String])
    /// The domain is built in and not editable.
    case notEditable(String)

    /// One line naming the domain and what is allowed.
    public var description: String {
        switch self {
        case .unknown(let name, let known):
            return "unknown domain '\(name)'; known domains: \(known.joined(separator: ", "))"
        case .notEditable(let name):
            return "domain '\(name)' is built in and cannot be modified"
        }
    }
}

/// The domains a device knows: the built-in ones plus any user-defined ones.
public struct DomainSet: Sendable {
    /// The domains in definition order (built-ins first).
    public private(set) var domains: [DSDomain]

    /// Creates a set from domains; a later domain of the same name replaces an
    /// earlier one in place.
    public init(_ domains: [DSDomain] = []) {
        self.domains = []
        for d in domains { self.insert(d) }
    }

    /// Adds or replaces a domain by name.
    public mutating func insert(_ domain: DSDomain) {
        if let i = domains.firstIndex(where: { $0.name == domain.name }) {
            domains[i] = domain
        } else {
            domains.append(domain)
        }
    }

    /// The domain with the name, or nil.
    public subscript(name: String) -> DSDomain? {
        domains.first(where: { $0.name == name })
    }

    /// The domain with the name, or an error listing the known names.
    public func domain(named name: String) throws(DomainSetError) -> DSDomain {
        guard let d = self[name] else { throw .unknown(name: name, known: names) }
        return d
    }

    /// The names, in order.
    public var names: [String] { domains.map(\.name) }
}
