import ArgumentParser
import QoSMapCore
import QoSMapDevices
import QoSMapTables

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

extension DeviceFormat: ExpressibleByArgument {
    /// Parses `sonic`, `junos`, `iosxr` or `linux`.
    public init?(argument: String) { self.init(rawValue: argument.lowercased()) }

    /// The names `export` and `import` list in their help.
    static var allowedNames: String { allCases.map(\.rawValue).joined(separator: ", ") }
}

extension QoSMapCommand.Export {
    /// `export sonic|junos|iosxr|linux`: the domains (and with `--config`, the
    /// interface bindings) as a device configuration; what the format cannot
    /// hold is summarised on standard error.
    func deviceExport(_ format: DeviceFormat) throws -> String {
        let request = try deviceRequest()
        let export: DeviceExport
        do {
            export = try format.exporter.export(request)
        } catch {
            throw DataError(error.description)
        }
        if strict, !export.losses.isEmpty {
            throw DataError(
                "export \(format): --strict and the format cannot hold everything: "
                    + export.losses.map(\.description).joined(separator: "; "))
        }
        for loss in export.losses { printError("qosmap export \(format): not expressible: \(loss)") }
        return export.text
    }

    /// The domains and bindings to export: `--domain` alone, or a qosmapd
    /// config's interfaces (its `domain:` replaced by `--domain` when given).
    func deviceRequest() throws -> ExportRequest {
        let command = (["qosmap", "export"] + CommandLine.arguments.dropFirst(2)).joined(separator: " ")
        guard let config else {
            let set = try tableOptions.load()
            return ExportRequest(
                domains: [try resolveDomain(domain ?? "default", in: set)], command: command)
        }
        var parsed = try ExportConfig.load(path: config)
        if let domain { parsed.domain = domain }
        let policies = try ExportPolicies(
            config: parsed, extraTables: tableOptions.tables,
            systemDirectory: tableOptions.noSystemTables ? nil : TableOptions.systemDirectory)
        var domains = [policies.defaultDomain]
        var bindings: [DeviceBinding] = []
        for name in parsed.interfaces.keys.sorted() {
            guard let (trust, inbound) = policies.inbound[name], let outbound = policies.outbound[name] else {
                continue
            }
            for d in [inbound, outbound] where !domains.contains(where: { $0.name == d.name }) {
                domains.append(d)
            }
            bindings.append(
                DeviceBinding(
                    interface: name, trust: trust, inboundDomain: inbound.name, outboundDomain: outbound.name,
                    rewrite: parsed.rewriteDSCP))
        }
        return ExportRequest(domains: domains, bindings: bindings, command: command)
    }
}

extension QoSMapCommand {
    /// `qosmap import FORMAT FILE`: a device's QoS maps back into a domain file.
    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract:
                "Read a SONiC config_db JSON or a Junos class-of-service config back into a domain file.",
            discussion: """
                FORMAT is sonic (config_db JSON: DSCP_TO_TC_MAP, DOT1P_TO_TC_MAP, MPLS_TC_TO_TC_MAP, \
                TC_TO_DSCP_MAP, TC_TO_DOT1P_MAP) or junos (`set class-of-service` lines: classifiers \
                and rewrite-rules). A file may define several maps: --map picks one by name. Cells \
                the file does not hold (SONiC has no color; a field may be absent) are taken from \
                --base and listed on standard error. The output is a qosmap domain file, written \
                through a temporary file renamed on success (a write error is exit 74, naming the file and \
                the cause; the old file is kept), or to standard output.

                Examples:
                  qosmap import sonic leaf1.json --map AZURE -o leaf1.yaml
                  qosmap import junos pe1.conf --base 5p3d
                  qosmap diff intent.yaml junos:pe1.conf
                """)

        @Argument(help: "The format: \(DeviceFormat.importable.map(\.rawValue).joined(separator: ", ")).")
        var format: DeviceFormat

        @Argument(help: "The device file.", completion: .file())
        var file: String

        @Option(name: .long, help: "The map (SONiC) or classifier/rewrite-rule name (Junos) to import.")
        var map: String?

        @Option(name: .long, help: "The domain name to write (default: the map's name).")
        var name: String?

        @Option(name: .long, help: "The domain that fills every cell the file does not hold.")
        var base: String = "default"

        @Option(
            name: [.short, .customLong("output")],
            help: "Write the domain file here (default: standard output).", completion: .file())
        var output: String?

        @OptionGroup var tableOptions: TableOptions

        func validate() throws {
            guard DeviceFormat.importable.contains(format) else {
                throw ValidationError(
                    "invalid format '\(format)' for import; allowed: "
                        + DeviceFormat.importable.map(\.rawValue).joined(separator: ", "))
            }
            if let name, let problem = DomainNameCheck.problem(name) { throw ValidationError(problem) }
        }

        func run() throws {
            let set = try tableOptions.load()
            let base = try resolveDomain(base, in: set)
            let imported = try DeviceFile.read(format, path: file, map: map)
            let (domain, notes) = imported.completed(
                base: base, name: name ?? DeviceFile.domainName(imported.name))
            for line in imported.unmapped + notes { printError("qosmap import: \(line)") }
            let header =
                ["Imported by: qosmap import \(format) \(file) (map \(imported.name), base \(base.name))"]
                + (imported.unmapped + notes).map { "- \($0)" }
            let text = DomainFileWriter.text(for: domain, header: header)
            if let output, output != "-" {
                try writeTextAtomically(text, to: output)
            } else {
                print(text, terminator: "")
            }
        }
    }
}

/// Reading device files for `import` and `diff`.
enum DeviceFile {
    /// The `FORMAT:FILE` form `diff` takes, e.g. `sonic:leaf1.json`; nil for anything else.
    static func reference(_ argument: String) -> (DeviceFormat, String)? {
        guard let colon = argument.firstIndex(of: ":") else { return nil }
        let prefix = argument[..<colon].lowercased()
        guard let format = DeviceFormat(rawValue: prefix), DeviceFormat.importable.contains(format) else {
            return nil
        }
        return (format, String(argument[argument.index(after: colon)...]))
    }

    /// Parses `path` and picks the map named `map`, or the only one.
    static func read(_ format: DeviceFormat, path: String, map: String?) throws -> ImportedDomain {
        guard let importer = format.importer else {
            throw UsageError("invalid format '\(format)' for import; allowed: sonic, junos")
        }
        let text: String
        do {
            text = try TableLoader.source(atPath: path).text
        } catch {
            // The loader words it for table files; this is a device's file.
            throw DataError(error.description.replacing("table file", with: "\(format) file"))
        }
        let all: [ImportedDomain]
        do {
            all = try importer.parse(text, file: path)
        } catch {
            throw DataError(error.description)
        }
        let names = all.map(\.name).joined(separator: ", ")
        if let map {
            guard let found = all.first(where: { $0.name == map }) else {
                throw UsageError(
                    "unknown --map '\(map)' in \(path); allowed: \(names.isEmpty ? "(none)" : names)")
            }
            return found
        }
        guard all.count == 1, let only = all.first else {
            throw all.isEmpty
                ? DataError("\(path):1:1: no \(format) QoS maps found")
                : UsageError("\(path) defines \(all.count) maps; name one with --map: \(names)")
        }
        return only
    }

    /// A valid domain name from a device map name (`AZURE` stays, `be-classifier` stays).
    static func domainName(_ mapName: String) -> String {
        let cleaned = String(
            mapName.map { c in c.isLetter || c.isNumber || c == "-" || c == "_" ? c : "-" })
        return DomainNameCheck.problem(cleaned) == nil ? cleaned : "imported"
    }
}

/// Domain names `import --name` accepts.
enum DomainNameCheck {
    /// Why `name` cannot name a domain, or nil.
    static func problem(_ name: String) -> String? {
        let ok =
            !name.isEmpty && name.count <= 64 && name.first?.isLetter == true
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
        return ok
            ? nil : "invalid --name '\(name)'; allowed: a letter, then up to 63 letters, digits, - and _"
    }
}

/// Writes `text` through a temporary file in the same directory renamed over
/// `path` on success; a path that exists and is not a regular file is written
/// in place. A failure is ``OutputError`` (exit 74): the old file is kept.
func writeTextAtomically(_ text: String, to path: String) throws(OutputError) {
    let target = OutputTarget(path)
    do {
        try target.write(Array(text.utf8))
        try target.commit()
    } catch {
        target.discard()
        throw error
    }
}
