import QoSMapCore

/// The `iosxr` format (placeholder until its exporter lands).
public enum IOSXRFormat: DeviceExporter {
    /// `.iosxr`.
    public static let format = DeviceFormat.iosxr

    /// Not written yet: throws.
    public static func export(_ request: ExportRequest) throws(DeviceFormatError) -> DeviceExport {
        throw DeviceFormatError("export iosxr: not implemented")
    }
}
