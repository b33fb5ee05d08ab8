import ArgumentParser
import Foundation
import QoSMapCapture
import QoSMapCore
import QoSMapPacket
import QoSMapTables

extension QoSMapCommand {
    /// `qosmap remark --in IN --out OUT`: rewrite the markings of a capture file.
    struct Remark: TextCommand {
        static let configuration = CommandConfiguration(
            commandName: "remark",
            abstract: "Rewrite the DSCP, 802.1p and MPLS EXP markings of a capture file through a DS domain.",
            discussion: """
                Each packet's trusted field is mapped to a service class and color by --domain, then to \
                new markings by --egress-domain. DSCP keeps the ECN bits and the IPv4 header checksum \
                is updated; 8021p writes the PCP of every VLAN tag (and the DEI of S-tags when the egress \
                domain carries color in DEI); exp writes the top MPLS label. Reads pcap or pcapng, \
                writes pcap with the input's link type. Malformed and unsupported packets are copied \
                unchanged; a packet whose fixed IP header is valid but whose options, lengths or \
                extension headers are not is still remarked, and also counted as a malformed tail. The \
                summary counts classes over the packets that carried a field to write.
                """)

        @Option(
            name: .customLong("in"),
            help: ArgumentHelp("The capture to read (pcap or pcapng).", valueName: "IN"))
        var input: String

        @Option(name: .customLong("out"), help: ArgumentHelp("The pcap file to write.", valueName: "OUT"))
        var output: String

        @Option(name: .long, help: "The trusted field, or none.")
        var trust: TrustMode = .dscp

        @Option(name: .long, help: "The ingress DS domain.")
        var domain: String = "default"

        @Option(name: .long, help: "The egress DS domain (default: --domain).")
        var egressDomain: String?

        @Option(
            name: .long,
            help: "The fields to write, comma-separated: dscp, 8021p, exp, or all. (default: dscp)",
            // ArgumentParser prints the value and the option, then the error's description.
            transform: { try RewriteFields(parsing: $0) })
        var rewrite: RewriteFields = .dscp

        @OptionGroup var tableOptions: TableOptions
        @OptionGroup var outputOptions: OutputOptions

        func validate() throws {
            if input.isEmpty { throw ValidationError("--in is empty; allowed: a capture file path") }
            if output.isEmpty { throw ValidationError("--out is empty; allowed: a file path") }
        }

        func standardOutput() throws -> String {
            let set = try tableOptions.load()
            let ingress = try resolveDomain(domain, in: set)
            let egress = try resolveDomain(egressDomain ?? domain, in: set)
            let policy = MarkingPolicy(trust: trust, ingress: ingress, egress: egress, rewrite: rewrite)

            let reader: CaptureReader
            do {
                reader = try CaptureReader(path: input)
            } catch {
                throw DataError("\(error.path): cannot read capture: \(error.message)")
            }
            let summary = try Self.remarkFile(reader: reader, outputPath: output, policy: policy)
            if outputOptions.json {
                return jsonText(summary.json(domain: ingress.name, egress: egress.name, trust: trust)) + "\n"
            }
            return summary.text(domain: ingress.name, egress: egress.name) + "\n"
        }

        /// Copies every record of `reader` to `outputPath` (via a temporary file
        /// renamed on success), remarking what it can.
        static func remarkFile(reader: CaptureReader, outputPath: String, policy: MarkingPolicy) throws
            -> RemarkSummary
        {
            let format: PacketFormat?
            switch reader.linkType {
            case .ethernet: format = .ethernet
            case .raw, .ipv4, .ipv6: format = .ip
            default: format = nil
            }
            let url = URL(fileURLWithPath: outputPath)
            let temp = url.deletingLastPathComponent()
                .appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp").path
            var summary = RemarkSummary(linkType: reader.linkType.description)
            // One buffer for the whole run: the loop allocates nothing per packet.
            let capacity = max(reader.snapshotLength, 262_144)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 8)
            defer { buffer.deallocate() }
            do {
                let writer = try CaptureWriter(
                    path: temp, linkType: reader.linkType, snapshotLength: reader.snapshotLength)
                do {
                    while let record = try reader.next(into: buffer) {
                        let packet = UnsafeMutableRawBufferPointer(
                            rebasing: buffer[0..<record.capturedLength])
                        if let format {
                            summary.count(PacketMarker.remark(packet, format: format, policy: policy))
                        } else {
                            summary.unsupported += 1
                        }
                        summary.packets += 1
                        writer.write(record, UnsafeRawBufferPointer(packet))
                    }
                    try writer.close()
                } catch {
                    try? writer.close()
                    throw error
                }
                guard rename(temp, outputPath) == 0 else {
                    let reason = String(cString: strerror(errno))
                    throw CaptureError(.write, path: outputPath, message: reason)
                }
            } catch let error as CaptureError {
                unlink(temp)
                switch error.operation {
                case .open, .read, .recordTooLarge:
                    throw DataError("\(error.path): cannot read capture: \(error.message)")
                case .write:
                    throw DataError("\(outputPath): cannot write capture: \(error.message)")
                case .library:
                    throw UnavailableError(error.message)
                }
            }
            return summary
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
    var unsupported = 0
    /// Packets remarked from a valid fixed IP header whose tail is malformed (also in their status count).
    var malformedTail = 0
    /// Packets per ingress class × color, in `Treatment.cellIndex` order.
    var cells = [Int](repeating: 0, count: 24)

    mutating func count(_ r: RemarkResult) {
        switch r.status {
        case .rewritten: rewritten += 1
        case .unchanged: unchanged += 1
        case .malformed: malformed += 1
        case .unsupported: unsupported += 1
        }
        if r.tailMalformed { malformedTail += 1 }
        if r.status == .rewritten || r.status == .unchanged {
            cells[r.treatment.cellIndex] += 1
        }
    }

    func text(domain: String, egress: String) -> String {
        var rows = [["CLASS", "GREEN", "YELLOW", "RED"]]
        for sc in ServiceClass.allCases {
            let counts = Color.allCases.map { cells[Treatment(sc, $0).cellIndex] }
            if counts.allSatisfy({ $0 == 0 }) { continue }
            rows.append([sc.name] + counts.map(String.init))
        }
        var lines = [
            "\(packets) packets (\(linkType)), domain \(domain) -> \(egress)",
            "rewritten \(rewritten), unchanged \(unchanged), malformed \(malformed), unsupported \(unsupported)"
                + ", malformed tail \(malformedTail)",
        ]
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
        var malformedTail: Int
        var classes: [String: [String: Int]]
    }

    func json(domain: String, egress: String, trust: TrustMode) -> JSON {
        var classes: [String: [String: Int]] = [:]
        for sc in ServiceClass.allCases {
            var row: [String: Int] = [:]
            for c in Color.allCases { row[c.name] = cells[Treatment(sc, c).cellIndex] }
            classes[sc.name] = row
        }
        return JSON(
            domain: domain, egressDomain: egress, trust: trust.name,
            linkType: linkType,
            packets: packets, rewritten: rewritten, unchanged: unchanged, malformed: malformed,
            unsupported: unsupported, malformedTail: malformedTail, classes: classes)
    }
}
