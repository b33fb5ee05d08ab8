import ArgumentParser
import QoSMapCapture
import QoSMapCore
import QoSMapPacket
import QoSMapTables

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

extension QoSMapCommand {
    /// `qosmap remark --in IN --out OUT`: rewrite the markings of a capture file.
    struct Remark: TextCommand {
        static let configuration = CommandConfiguration(
            commandName: "remark",
            abstract: "Rewrite the DSCP, 802.1p and MPLS EXP markings of a capture file.",
            discussion: """
                Each packet's trusted field (--trust) is mapped to a service class and
                color by --domain, then to new markings by --egress-domain.
                  dscp   keeps the ECN bits; the IPv4 header checksum is updated
                  8021p  the PCP of every VLAN tag (--tag outer|inner: that tag only),
                         and the DEI of S-tags when the egress domain has dei: color
                  exp    the top MPLS label
                Link types: Ethernet, raw IP, Linux cooked (SLL, SLL2), loopback.
                Malformed packets and packets with no field to write are copied
                unchanged. A packet whose fixed IP header is valid but whose options,
                lengths or extension headers are not is still remarked.

                Formats: reads pcap and pcapng through libpcap and writes pcap with
                the input's link type (nanosecond pcap stays nanosecond). pcapng
                comments, interface names and statistics are not kept, and libpcap
                refuses a pcapng file whose interfaces differ in link type or
                snapshot length.

                A capture that cannot be read to its end (cut off mid-record, or a
                record libpcap refuses after the first packets) is a failure: exit 65
                and OUT is left as it was (tcpdump and tshark also fail on it).
                --keep-partial writes the complete packets before the cut instead,
                warns on standard error and exits 0; --json then carries the cut as
                "truncated".

                Exit status: 0 success; 64 a bad option; 65 a capture that cannot be
                read (OUT is left as it was); 69 libpcap could not be loaded; 74 OUT
                could not be written (the line names it and the cause, such as "No
                space left on device"; the old OUT is kept, no temporary file is left).

                Examples:
                  qosmap remark --in trace.pcap --out remarked.pcap
                  qosmap remark --in voice.pcap --out - --trust 8021p --untrusted keep
                  qosmap remark --in qinq.pcap --out out.pcap --trust 8021p \\
                      --rewrite 8021p --tag inner --egress-domain 5p3d --json
                """)

        @Option(
            name: .customLong("in"),
            help: ArgumentHelp("The capture to read (pcap or pcapng).", valueName: "IN"), completion: .file())
        var input: String

        @Option(
            name: .customLong("out"),
            help: ArgumentHelp(
                "The pcap file to write, or - for standard output (the summary then goes to standard error).",
                valueName: "OUT"), completion: .file())
        var output: String

        @Option(name: .long, help: "The trusted field, or none.")
        var trust: TrustMode = .dscp

        @Option(name: .long, help: "The ingress DS domain.", completion: Completions.domain)
        var domain: String = "default"

        @Option(
            name: .long, help: "The egress DS domain (default: --domain).", completion: Completions.domain)
        var egressDomain: String?

        @Option(
            name: .long,
            help: "The fields to write, comma-separated: dscp, 8021p, exp, or all. (default: dscp)",
            completion: Completions.rewrite,
            // ArgumentParser prints the value and the option, then the error's description.
            transform: { try RewriteFields(parsing: $0) })
        var rewrite: RewriteFields = .dscp

        @Option(
            name: .long,
            help: ArgumentHelp(
                "What to do with a packet that lacks the trusted field: default (classify it BE/green and write it) or keep (leave it unchanged).",
                valueName: "default|keep"))
        var untrusted: UntrustedFallback = .bestEffort

        @Option(
            name: .long,
            help: ArgumentHelp(
                "The VLAN tags of a QinQ stack that 8021p uses: all (trust the outer, write every tag), outer or inner (trust and write that tag only).",
                valueName: "all|outer|inner"))
        var tag: TagSelection = .all

        @Flag(
            name: .long,
            help:
                "When the capture is cut off (or unreadable) after some packets: write those, warn, and exit 0 instead of failing with OUT left as it was."
        )
        var keepPartial = false

        @Flag(name: .long, help: "Also list the index (1-based) of each malformed packet.")
        var verbose = false

        @OptionGroup var tableOptions: TableOptions
        @OptionGroup var outputOptions: OutputOptions

        func validate() throws {
            if input.isEmpty { throw ValidationError("--in is empty; allowed: a capture file path") }
            if output.isEmpty { throw ValidationError("--out is empty; allowed: a file path or -") }
            if input != "-", output != "-", OutputTarget.sameFile(input, output) {
                throw ValidationError(
                    "--out '\(output)' is the --in file; allowed: another path (the input is read while the output is written)"
                )
            }
        }

        func standardOutput() throws -> String {
            let set = try tableOptions.load()
            let ingress = try resolveDomain(domain, in: set)
            let egress = try resolveDomain(egressDomain ?? domain, in: set)
            var policy = MarkingPolicy(trust: trust, ingress: ingress, egress: egress, rewrite: rewrite)
            policy.untrusted = untrusted
            policy.tags = tag

            let reader: CaptureReader
            do {
                reader = try CaptureReader(path: input)
            } catch {
                throw Self.commandError(error, outputPath: output)
            }
            let summary = try Self.remarkFile(
                reader: reader, outputPath: output, policy: policy, keepPartial: keepPartial)
            let text =
                outputOptions.json
                ? jsonText(
                    summary.json(
                        domain: ingress.name, egress: egress.name, trust: trust, untrusted: untrusted,
                        verbose: verbose))
                : summary.text(
                    domain: ingress.name, egress: egress.name, trust: trust, untrusted: untrusted,
                    verbose: verbose)
            // With --out - the capture owns standard output.
            // The capture owns standard output when --out is - or names the
            // same file (/dev/stdout): the summary then goes to standard error.
            let toStandardOutput = output == "-" || OutputTarget.isStandardOutput(output)
            if let truncation = summary.truncation {
                let cut = Self.cutText(input, packets: summary.packets, reason: truncation)
                guard keepPartial else {
                    // Written in place (standard output, a FIFO): the packets before the cut are out.
                    let outcome =
                        OutputTarget(output).renames
                        ? "\(output) is left as it was (--keep-partial writes the \(summary.packets) complete packets)"
                        : "the \(summary.packets) packets before the cut are written to \(output)"
                    throw DataError("\(cut); \(outcome)")
                }
                printError(
                    "qosmap: warning: \(cut); the \(summary.packets) complete packets are written (--keep-partial)"
                )
            }
            if toStandardOutput { printError(text) }
            return toStandardOutput ? "" : text + "\n"
        }

        /// Copies every record of `reader` to `outputPath`, remarking what it can.
        /// A regular file or a new path is written via a temporary file renamed on
        /// success; `-` is standard output, and anything else (a device, a FIFO,
        /// a symlink such as /dev/stdout) is written in place, never replaced.
        /// `IN: capture is cut off after N complete packets: REASON` (or "unreadable" for another read error).
        static func cutText(_ input: String, packets: Int, reason: String) -> String {
            let what = reason.contains("truncated") ? "cut off" : "unreadable"
            return "\(input): capture is \(what) after \(packets) complete packets: \(reason)"
        }

        /// With `keepPartial` false, a read error after the first packets
        /// leaves the output as it was (the temporary file is removed) and
        /// the summary carries the cut in `truncation`.
        static func remarkFile(
            reader: CaptureReader, outputPath: String, policy: MarkingPolicy, keepPartial: Bool = false
        ) throws
            -> RemarkSummary
        {
            let link = LinkLayer(reader.linkType)
            let target = OutputTarget(outputPath)
            let temp = target.writePath
            var summary = RemarkSummary(linkType: reader.linkType.description, fallback: policy.untrusted)
            // One buffer for the whole run: the loop allocates nothing per packet.
            let capacity = max(reader.snapshotLength, 262_144)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 8)
            defer { buffer.deallocate() }
            do {
                let writer = try CaptureWriter(
                    path: temp, linkType: reader.linkType, snapshotLength: reader.snapshotLength,
                    precision: reader.precision)
                do {
                    while true {
                        let next: CaptureRecord?
                        do {
                            next = try reader.next(into: buffer)
                        } catch  where error.operation == .read || error.operation == .recordTooLarge {
                            // A file cut off mid-record, or a record libpcap refuses: the
                            // complete records are written with --keep-partial only.
                            summary.truncation = error.message
                            break
                        }
                        guard let record = next else { break }
                        let packet = UnsafeMutableRawBufferPointer(
                            rebasing: buffer[0..<record.capturedLength])
                        summary.packets += 1
                        switch link?.view(packet) {
                        case nil:
                            summary.unsupportedLinkType += 1
                        case .some(.packet(let inner, let format)):
                            summary.count(
                                PacketMarker.remark(inner, format: format, policy: policy),
                                snapped: record.capturedLength < record.originalLength)
                        case .some(.notIP):
                            summary.count(RemarkResult(status: .unsupported))
                        case .some(.truncated):
                            summary.count(RemarkResult(status: .malformed))
                        }
                        try writer.write(record, UnsafeRawBufferPointer(packet))
                    }
                    try writer.close()
                } catch {
                    try? writer.close()
                    throw error
                }
                if summary.truncation != nil && !keepPartial {
                    target.discard()
                    return summary
                }
                try target.commit(what: "capture")
            } catch let error as CaptureError {
                target.discard()
                throw commandError(error, outputPath: outputPath)
            } catch {
                target.discard()
                throw error
            }
            return summary
        }

        /// The CLI error for a capture error: libpcap missing is exit 69 and
        /// names the library, not the capture; a bad capture is exit 65; an
        /// output that cannot be written is exit 74, with the system's reason.
        static func commandError(_ error: CaptureError, outputPath: String) -> any Error {
            switch error.operation {
            case .open, .read, .recordTooLarge:
                return DataError("\(error.path): cannot read capture: \(error.message)")
            case .write:
                return OutputError(path: outputPath, what: "capture", reason: error.message)
            case .library:
                return UnavailableError(error.message)
            }
        }
    }
}

/// The link-layer types `remark` reads, and where each packet's Ethernet
/// or IP view starts.
enum LinkLayer {
    case ethernet, ip
    /// Linux cooked v1: 16 bytes, the EtherType in bytes 14-15.
    case sll
    /// Linux cooked v2: 20 bytes, the EtherType in bytes 0-1.
    case sll2
    /// BSD (host order) and OpenBSD (network order) loopback: a 4-byte address family.
    case loopback

    /// What a packet holds for the marker.
    enum View {
        case packet(UnsafeMutableRawBufferPointer, PacketFormat)
        case notIP
        case truncated
    }

    /// Nil for a link type remark does not parse.
    init?(_ type: LinkType) {
        switch type {
        case .ethernet: self = .ethernet
        case .raw, .ipv4, .ipv6: self = .ip
        case .linuxSLL: self = .sll
        case .linuxSLL2: self = .sll2
        case .null, .loop: self = .loopback
        default: return nil
        }
    }

    func view(_ p: UnsafeMutableRawBufferPointer) -> View {
        func rebased(_ from: Int) -> UnsafeMutableRawBufferPointer {
            UnsafeMutableRawBufferPointer(rebasing: p[from...])
        }
        func etherType(at i: Int) -> Int { Int(p[i]) << 8 | Int(p[i + 1]) }
        switch self {
        case .ethernet: return .packet(p, .ethernet)
        case .ip: return .packet(p, .ip)
        case .sll:
            guard p.count >= 16 else { return .truncated }
            // Bytes 2-15 read as an Ethernet header whose type is the SLL
            // protocol, so VLAN tags and MPLS after it parse as on Ethernet.
            return .packet(rebased(2), .ethernet)
        case .sll2:
            guard p.count >= 20 else { return .truncated }
            let type = etherType(at: 0)
            return type == 0x0800 || type == 0x86DD ? .packet(rebased(20), .ip) : .notIP
        case .loopback:
            guard p.count >= 4 else { return .truncated }
            // AF_INET is 2 everywhere; AF_INET6 is 10 (Linux), 24, 28 or 30 (BSDs, macOS).
            let le = Int(p[0]) | Int(p[1]) << 8 | Int(p[2]) << 16 | Int(p[3]) << 24
            let be = Int(p[3]) | Int(p[2]) << 8 | Int(p[1]) << 16 | Int(p[0]) << 24
            let families: Set = [2, 10, 24, 28, 30]
            return families.contains(le) || families.contains(be) ? .packet(rebased(4), .ip) : .notIP
        }
    }
}

/// What a remark run did.
struct RemarkSummary {
    var linkType: String
    var packets = 0
    var rewritten = 0
    var unchanged = 0
    var malformed = 0
    /// Parsed, but none of the fields to write is present (ARP with `--rewrite dscp`).
    var noFieldToWrite = 0
    /// Packets of a link type remark does not parse, copied unchanged.
    var unsupportedLinkType = 0
    /// Packets without the trusted field (given the fallback, or kept).
    var untrusted = 0
    /// Packets remarked from a valid fixed IP header whose tail is malformed (also in their status count).
    var malformedTail = 0
    /// Packets whose DSCP, 802.1p or EXP bytes changed.
    var changed: [Field: Int] = [:]
    /// The 1-based index of each malformed packet.
    var malformedIndices: [Int] = []
    /// libpcap's message when the file is cut off mid-record.
    var truncation: String?
    /// The policy's fallback for packets without the trusted field.
    var fallback: UntrustedFallback = .bestEffort
    /// Packets per ingress class × color, in `Treatment.cellIndex` order.
    var cells = [Int](repeating: 0, count: 24)

    /// `unsupported` in the JSON: no field to write plus unsupported link type.
    var unsupported: Int { noFieldToWrite + unsupportedLinkType }

    /// Packets cut by the capture's snapshot length (`tcpdump -s 96`) after
    /// complete headers: remarked, and not counted as a malformed tail.
    var snapped = 0

    /// Counts one packet; call after incrementing `packets`. `snapped`: the
    /// record holds fewer bytes than the packet had on the wire.
    mutating func count(_ r: RemarkResult, snapped isSnapped: Bool = false) {
        switch r.status {
        case .rewritten: rewritten += 1
        case .unchanged: unchanged += 1
        case .malformed:
            malformed += 1
            malformedIndices.append(packets)
        case .unsupported: noFieldToWrite += 1
        }
        // The IP lengths of a snapped packet run past the record: that is the
        // snapshot length at work, not a malformed tail.
        if r.tailMalformed && isSnapped {
            snapped += 1
        } else if r.tailMalformed {
            malformedTail += 1
        }
        if r.trustedFieldAbsent { untrusted += 1 }
        for field in r.changedFields.fields { changed[field, default: 0] += 1 }
        // A packet kept for want of the trusted field was not classified.
        let kept = r.trustedFieldAbsent && fallback == .keep
        if (r.status == .rewritten || r.status == .unchanged) && !kept {
            cells[r.treatment.cellIndex] += 1
        }
    }

    func text(
        domain: String, egress: String, trust: TrustMode, untrusted fallback: UntrustedFallback, verbose: Bool
    )
        -> String
    {
        var rows = [["CLASS", "GREEN", "YELLOW", "RED"]]
        for sc in ServiceClass.allCases {
            let counts = Color.allCases.map { cells[Treatment(sc, $0).cellIndex] }
            if counts.allSatisfy({ $0 == 0 }) { continue }
            rows.append([sc.name] + counts.map(String.init))
        }
        var lines = [
            "\(packets) packets (\(linkType)), domain \(domain) -> \(egress)",
            "rewritten \(rewritten), unchanged \(unchanged), malformed \(malformed), no field to write \(noFieldToWrite)"
                + ", unsupported link type \(unsupportedLinkType), malformed tail \(malformedTail), snapped \(snapped)",
            "rewritten fields: "
                + RewriteFields.writable.map { "\($0.name) \(changed[$0, default: 0])" }.joined(
                    separator: ", "),
        ]
        if untrusted > 0 {
            let what =
                fallback == .keep
                ? "left unchanged (--untrusted keep)"
                : "classified BE/green (--untrusted keep leaves them unchanged)"
            lines.append("without the trusted \(trust.name) field: \(untrusted), \(what)")
        }
        if verbose && !malformedIndices.isEmpty {
            lines.append(
                "malformed packets (1-based): " + malformedIndices.map(String.init).joined(separator: ", "))
        }
        if rows.count > 1 {
            lines.append("ingress class and color:")
            lines.append(table(rows, indent: "  "))
        }
        return lines.joined(separator: "\n")
    }

    struct JSON: Encodable {
        var domain: String
        var egressDomain: String
        var trust: String
        var linkType: String
        var packets: Int
        var rewritten: Int
        var unchanged: Int
        var malformed: Int
        var unsupported: Int
        var noFieldToWrite: Int
        var unsupportedLinkType: Int
        var untrusted: Int
        var untrustedFallback: String
        var malformedTail: Int
        var snapped: Int
        var rewrittenFields: [String: Int]
        var malformedPackets: [Int]?
        var truncated: String?
        var classes: [String: [String: Int]]
    }

    func json(
        domain: String, egress: String, trust: TrustMode, untrusted fallback: UntrustedFallback, verbose: Bool
    )
        -> JSON
    {
        var classes: [String: [String: Int]] = [:]
        for sc in ServiceClass.allCases {
            var row: [String: Int] = [:]
            for c in Color.allCases { row[c.name] = cells[Treatment(sc, c).cellIndex] }
            classes[sc.name] = row
        }
        var fields: [String: Int] = [:]
        for f in RewriteFields.writable { fields[f.name] = changed[f, default: 0] }
        return JSON(
            domain: domain, egressDomain: egress, trust: trust.name,
            linkType: linkType,
            packets: packets, rewritten: rewritten, unchanged: unchanged, malformed: malformed,
            unsupported: unsupported, noFieldToWrite: noFieldToWrite,
            unsupportedLinkType: unsupportedLinkType,
            untrusted: untrusted, untrustedFallback: fallback.rawValue,
            malformedTail: malformedTail, snapped: snapped, rewrittenFields: fields,
            malformedPackets: verbose ? malformedIndices : nil, truncated: truncation, classes: classes)
    }
}
