import Foundation
import Testing

@testable import QoSMapCLI

/// Issue 13 item 9: errors say what is wrong.
@Suite("qosmap error messages")
struct ErrorMessageTests {
    /// An unknown subcommand is named, with the valid ones, even when options follow it.
    @Test func item9_unknownSubcommandIsNamed() {
        let top = qosmapInProcess(["nosuch", "dscp", "46", "--domain", "default"])
        #expect(top.status == 64)
        #expect(top.err == "qosmap: error: unknown subcommand 'nosuch'; allowed: \(subcommandNames)\n")
        let profile = qosmapInProcess(["profile", "nosuch"])
        let names = QoSMapCommand.ProfileCommand.configuration.subcommands.map { $0._commandName }
        #expect(profile.status == 64)
        #expect(
            profile.err
                == "qosmap: error: unknown subcommand 'nosuch' of 'profile'; allowed: \(names.joined(separator: ", "))\n"
        )
    }

    /// An option that does not apply is refused, not ignored.
    @Test func item9_colorOnAnInboundLookupIsRefused() {
        let result = qosmapInProcess(["lookup", "dscp", "46", "--color", "red"])
        #expect(result.status == 64)
        #expect(result.err == "qosmap: error: --color applies only to 'lookup class', not 'dscp'\n")
    }

    /// With --json an error is one JSON object on stderr; the status is kept.
    @Test(arguments: [
        (
            ["lookup", "tos", "1", "--json"], 64,
            #"{"allowed":["dscp","ip-precedence (prec)","8021p (pcp, dot1p)","exp (mpls-exp)","class","qci","5qi","app","service"],"error":"unknown field 'tos'; allowed: dscp, ip-precedence (prec), 8021p (pcp, dot1p), exp (mpls-exp), class, qci, 5qi, app, service","token":"tos"}"#
        ),
        (
            ["lookup", "dscp", "99", "--json"], 64,
            #"{"allowed":["0-63"],"error":"dscp value 99 is out of range; allowed: 0-63","token":"99"}"#
        ),
        (
            ["lookup", "class", "EF", "--color", "blue", "--json"], 64,
            #"{"allowed":["green","yellow","red"],"error":"The value 'blue' is invalid for '--color <color>'. Please provide one of 'green', 'yellow' or 'red'.","token":"blue"}"#
        ),
    ])
    func item9_jsonErrors(args: [String], status: Int32, json: String) {
        let result = qosmapInProcess(args)
        #expect(result.status == status)
        #expect(result.out == "")
        #expect(result.err == json + "\n")
    }

    /// The JSON error of a subprocess parses, and names the token.
    @Test func item9_jsonErrorFromTheBinaryParses() throws {
        let result = try qosmap(["show", "nowhere", "--json"])
        #expect(result.status == 64)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(result.err.utf8)) as? [String: Any])
        #expect(object["token"] as? String == "nowhere")
        #expect((object["error"] as? String)?.hasPrefix("unknown domain 'nowhere'") == true)
    }
}
