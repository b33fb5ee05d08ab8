import QoSMapCore

/// A device configuration format that `qosmap export` writes and, for some,
/// `qosmap import` reads back.
public enum DeviceFormat: String, CaseIterable, Sendable, CustomStringConvertible {
    /// SONiC config_db JSON (`DSCP_TO_TC_MAP`, `TC_TO_DSCP_MAP`, …, `PORT_QOS_MAP`).
    case sonic
    /// Junos `set class-of-service …` lines.
    case junos
    /// Cisco IOS-XR MQC class-maps and policy-maps.
    case iosxr
    /// Linux `ip link … egress-qos-map` and `dcb app` commands.
    case linux

    /// The format's name on the command line.
    public var description: String { rawValue }

    /// The formats `qosmap import` reads.
    public static let importable: [DeviceFormat] = [.sonic, .junos]

    /// The exporter for this format.
    public var exporter: any DeviceExporter.Type {
        switch self {
        case .sonic: SONiCFormat.self
        case .junos: JunosFormat.self
        case .iosxr: IOSXRFormat.self
        case .linux: LinuxFormat.self
        }
    }

    /// The importer for this format, nil when the format is export-only.
    public var importer: (any DeviceImporter.Type)? {
        switch self {
        case .sonic: SONiCFormat.self
        case .junos: JunosFormat.self
        case .iosxr, .linux: nil
        }
    }
}

/// One interface's marking, as a qosmapd config binds it: what it trusts on
/// ingress, and which domains classify there and mark on egress.
public struct DeviceBinding: Sendable, Equatable {
    /// The interface name as the config gives it (e.g. `Ethernet0`, `ge-0/0/1`, `eth0`).
    public var interface: String
    /// The field the interface classifies on when packets arrive.
    public var trust: TrustMode
    /// The domain that classifies packets arriving on the interface.
    public var inboundDomain: String
    /// The domain whose markings packets leaving the interface get.
    public var outboundDomain: String
    /// Whether egress rewrites the marking (qosmapd's `actions.rewrite-dscp`).
    public var rewrite: Bool

    /// Creates a binding.
    public init(
        interface: String, trust: TrustMode, inboundDomain: String, outboundDomain: String,
        rewrite: Bool = true
    ) {
        self.interface = interface
        self.trust = trust
        self.inboundDomain = inboundDomain
        self.outboundDomain = outboundDomain
        self.rewrite = rewrite
    }
}

/// What to export: the domains (the first is the one `--domain` named) and,
/// with `--config`, the interface bindings.
public struct ExportRequest: Sendable {
    /// The domains to write, each once, in order.
    public var domains: [DSDomain]
    /// Interface bindings; empty without `--config`.
    public var bindings: [DeviceBinding]
    /// The command line, for the header comment.
    public var command: String

    /// Creates a request.
    public init(domains: [DSDomain], bindings: [DeviceBinding] = [], command: String = "") {
        self.domains = domains
        self.bindings = bindings
        self.command = command
    }
}

/// Something an export cannot express, reported on stderr as one summary line.
public struct ExportLoss: Sendable, Equatable, CustomStringConvertible {
    /// The domain concerned.
    public var domain: String
    /// What is lost, e.g. "color of inbound dscp".
    public var what: String
    /// Where and how much, e.g. "27 cells yellow/red; exported as their class only".
    public var detail: String

    /// Creates a loss report.
    public init(domain: String, what: String, detail: String) {
        self.domain = domain
        self.what = what
        self.detail = detail
    }

    /// `domain D: WHAT: DETAIL`.
    public var description: String { "domain \(domain): \(what): \(detail)" }
}

/// An export's text and what it could not express.
public struct DeviceExport: Sendable {
    /// The configuration text.
    public var text: String
    /// Everything the format could not hold; empty when the export is exact.
    public var losses: [ExportLoss]

    /// Creates an export.
    public init(text: String, losses: [ExportLoss] = []) {
        self.text = text
        self.losses = losses
    }
}

/// A format that can be written from domains.
public protocol DeviceExporter {
    /// The format.
    static var format: DeviceFormat { get }
    /// Writes the domains and bindings; never silently lossy: every cell or
    /// binding the format cannot express is in ``DeviceExport/losses``.
    static func export(_ request: ExportRequest) throws(DeviceFormatError) -> DeviceExport
}

/// A format that can be read back into (partial) domains.
public protocol DeviceImporter {
    /// The format.
    static var format: DeviceFormat { get }
    /// Reads every map set the text defines (a SONiC map name, a Junos
    /// classifier/rewrite-rule family), one ``ImportedDomain`` each.
    /// Errors name `file:line:column`.
    static func parse(_ text: String, file: String) throws(DeviceFormatError) -> [ImportedDomain]
}

/// A bad device file or an impossible export: one line, `file:line:column: message` when a place is known.
public struct DeviceFormatError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The whole message.
    public var description: String

    /// A message with no place.
    public init(_ message: String) { description = message }

    /// A message at a place in a file.
    public init(file: String, line: Int, column: Int, _ message: String) {
        description = "\(file):\(line):\(column): \(message)"
    }
}
