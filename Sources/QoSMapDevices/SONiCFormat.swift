import QoSMapCore

/// The `sonic` format (placeholder until its exporter lands).
public enum SONiCFormat: DeviceExporter, DeviceImporter {
    /// `.sonic`.
    public static let format = DeviceFormat.sonic

    /// Not written yet: throws.
    public static func export(_ request: ExportRequest) throws(DeviceFormatError) -> DeviceExport {
        throw DeviceFormatError("export sonic: not implemented")
    }

    /// Not written yet: throws.
    public static func parse(_ text: String, file: String) throws(DeviceFormatError) -> [ImportedDomain] {
        throw DeviceFormatError("import sonic: not implemented")
    }
}
