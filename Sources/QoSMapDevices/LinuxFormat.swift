import QoSMapCore

/// The `linux` format (placeholder until its exporter lands).
public enum LinuxFormat: DeviceExporter {
    /// `.linux`.
    public static let format = DeviceFormat.linux

    /// Not written yet: throws.
    public static func export(_ request: ExportRequest) throws(DeviceFormatError) -> DeviceExport {
        throw DeviceFormatError("export linux: not implemented")
    }
}
