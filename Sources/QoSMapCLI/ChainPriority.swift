#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// An nftables base-chain priority as `export nft --priority` takes it: a
/// number in nft's range (a signed 32-bit integer), or one of nft's standard
/// names for the inet family, optionally with an offset (`mangle`, `filter+5`,
/// `mangle-10`). Written to the ruleset as the number, so the name's hook
/// restrictions (`dstnat` at prerouting only) cannot make nft refuse it.
struct ChainPriority: Equatable, CustomStringConvertible {
    /// nft's standard priority names and their values (nft(8), "PRIORITY").
    static let names: [(name: String, value: Int)] = [
        ("raw", -300), ("mangle", -150), ("dstnat", -100), ("filter", 0), ("security", 50), ("srcnat", 100),
    ]

    /// The priority as a number.
    let value: Int

    /// Creates a priority from its number.
    init(_ value: Int) { self.value = value }

    /// Parses `N`, `NAME`, `NAME+N` or `NAME-N`; nil for anything else or a
    /// value outside nft's signed 32-bit range.
    init?(argument: String) {
        let text = trimmingBlanks(argument).lowercased()
        var total: Int?
        if let n = Int(text) {
            total = n
        } else if let (name, base) = Self.names.first(where: { text.hasPrefix($0.name) }) {
            let rest = text.dropFirst(name.count).filter { $0 != " " }
            if rest.isEmpty {
                total = base
            } else if let sign = rest.first, sign == "+" || sign == "-", let n = Int(rest.dropFirst()) {
                total = sign == "+" ? base + n : base - n
            }
        }
        guard let total, total >= Int(Int32.min), total <= Int(Int32.max) else { return nil }
        value = total
    }

    /// The number, as nft reads it.
    var description: String { String(value) }

    /// What `--priority` accepts, for help and errors.
    static let allowed =
        "a number from \(Int32.min) to \(Int32.max), or "
        + names.map { "\($0.name) (\($0.value))" }.joined(separator: ", ") + ", optionally +N or -N"
}
