import Foundation
import Testing

/// Issue 13 items 17 and 15: help that teaches, laid out as written.
@Suite("qosmap help")
struct HelpTests {
    /// The help of `qosmap ARGS --help`, as printed.
    func help(_ args: [String]) throws -> String {
        let result = try qosmap(args + ["--help"], environment: ["COLUMNS": "80"])
        #expect(result.status == 0)
        return result.out
    }

    /// The commands whose help this issue rewrote (export and profile belong to
    /// other work).
    @Test(arguments: [
        [], ["lookup"], ["show"], ["domains"], ["validate"], ["remark"], ["names"], ["export"], ["profile"],
        ["explain"], ["diff"], ["lint"],
    ])
    func item17_helpHasExamplesLaidOutAsWritten(command: [String]) throws {
        let text = try help(command)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let examples = lines.firstIndex(of: "Examples:")
        #expect(examples != nil, "\(command): no Examples section")
        if let examples {
            let first = lines[examples + 1]
            #expect(first.hasPrefix("  qosmap "), "\(command): \(first)")
        }
        // Discussion lines stay under the 80 columns ArgumentParser wraps at,
        // so nothing is re-wrapped.
        let discussion = lines.prefix { !$0.hasPrefix("USAGE:") }
        for line in discussion.dropFirst() { #expect(line.count < 80, "\(command): \(line)") }
        // No Swift type names.
        for name in ["MarkEncoding", "TrustMode", "RewriteFields", "ServiceClass", "DSDomain"] {
            #expect(!text.contains(name), "\(command): \(name)")
        }
    }

    /// An option whose values are names (`--color`, `--field`, `--class`) lists
    /// them once, "(values: …)", and prints no value line with an empty
    /// description ("green - "), which ArgumentParser's default descriptions of
    /// a `UInt8`-backed enum made.
    @Test(arguments: [
        (["lookup"], "--color", "green, yellow, red"),
        (["show"], "--field", "dscp, ip-precedence, 8021p, exp"),
        (["diff"], "--field", "dscp, ip-precedence, 8021p, exp"),
    ])
    func namedValuesAreListedWithoutEmptyDescriptions(
        command: [String], option: String, values: String
    ) throws {
        let text = try help(command)
        let lines = text.split(separator: "\n").map(String.init)
        for line in lines {
            let blank = line.hasSuffix(" -") || line.hasSuffix(" - ")
            #expect(!(blank && line.hasPrefix("        ")), "\(command): '\(line)'")
        }
        guard let at = lines.firstIndex(where: { $0.hasPrefix("  \(option) ") }) else {
            Issue.record("\(command): no \(option)")
            return
        }
        // The entry's lines, with the wrapping's indentation collapsed.
        let entry = lines[at...].prefix(3).joined(separator: " ")
            .split(separator: " ").joined(separator: " ")
        #expect(entry.contains("(values: \(values))"), "\(command): \(entry)")
    }

    /// The pcapng limits are stated where a user looks.
    @Test func item15_remarkHelpStatesThePcapngLimits() throws {
        let text = try help(["remark"])
        #expect(text.contains("pcapng\ncomments, interface names and statistics are not kept"))
        #expect(
            text.contains("refuses a pcapng file whose interfaces differ in link type or\nsnapshot length"))
    }
}
