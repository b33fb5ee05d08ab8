import QoSMapCore

/// The `junos` format (placeholder until its exporter lands).
public enum JunosFormat: DeviceExporter, DeviceImporter {
    /// `.junos`.
    public static let format = DeviceFormat.junos

    /// Not written yet: throws.
    public static func export(_ request: ExportRequest) throws(DeviceFormatError) -> DeviceExport {
        throw DeviceFormatError("export junos: not implemented")
    }

    /// Not written yet: throws.
    public static func parse(_ text: String, file: String) throws(DeviceFormatError) -> [ImportedDomain] {
        throw DeviceFormatError("import junos: not implemented")
    }
}
