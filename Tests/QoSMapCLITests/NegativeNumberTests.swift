import Foundation
import Testing

@testable import QoSMapCLI

/// Issue 13 item 8: a negative number is a value, not an unknown option.
@Suite("qosmap negative numbers")
struct NegativeNumberTests {
    /// `--priority -200` works as `--priority=-200` does.
    @Test func item8_priorityTakesANegativeValue() {
        let spaced = qosmapInProcess(["export", "nft", "--priority", "-200", "--no-system-tables"])
        let joined = qosmapInProcess(["export", "nft", "--priority=-200", "--no-system-tables"])
        #expect(spaced.status == 0, "\(spaced.err)")
        #expect(spaced.out.contains("priority -200;"))
        #expect(spaced.out == joined.out)
    }

    /// `lookup dscp -1` names the value and what is allowed, not a missing argument.
    @Test func item8_aNegativePositionalIsNamed() {
        let result = qosmapInProcess(["lookup", "dscp", "-1"])
        #expect(result.status == 64)
        #expect(
            result.err.hasPrefix("qosmap: error: invalid dscp value '-1'; allowed: 0-63"), "\(result.err)")
    }

    @Test(arguments: [
        (["export", "nft", "--priority", "-200"], ["export", "nft", "--priority=-200"]),
        (["lookup", "dscp", "-1", "--json"], ["lookup", "dscp", "--json", "--", "-1"]),
        (["lookup", "dscp", "46"], nil),
        (["lookup", "dscp", "-1", "--", "x"], nil),
    ])
    func item8_repair(args: [String], repaired: [String]?) {
        #expect(QoSMapCommand.negativeNumbersAsValues(args) == repaired)
    }
}

/// Issue 13 item 8: nft's named priorities, offsets, and nft's range.
@Suite struct ChainPriorityTests {
    @Test(arguments: [
        ("mangle", "priority -150;"), ("filter", "priority 0;"), ("raw", "priority -300;"),
        ("security", "priority 50;"), ("filter+10", "priority 10;"), ("mangle - 5", "priority -155;"),
        ("-2147483648", "priority -2147483648;"), ("2147483647", "priority 2147483647;"),
    ])
    func item8_namedAndNumericPriorities(value: String, line: String) {
        let r = qosmapInProcess(["export", "nft", "--priority", value, "--no-system-tables"])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains(line), "\(r.out.prefix(300))")
    }

    @Test(arguments: ["99999999999", "2147483648", "-2147483649", "mangel", "filter+", "filter*2"])
    func item8_badPrioritiesAreNamed(value: String) {
        let r = qosmapInProcess(["export", "nft", "--priority=\(value)", "--no-system-tables"])
        #expect(r.status == 64)
        #expect(
            r.err.hasPrefix(
                "qosmap: error: invalid --priority '\(value)'; allowed: a number from -2147483648"),
            "\(r.err)")
        #expect(r.err.contains("mangle (-150)"))
    }
}
