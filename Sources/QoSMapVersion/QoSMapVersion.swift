/// The version of qosmap and qosmapd: the first entry of `debian/changelog`,
/// compiled in by the `EmbedVersion` build plugin (the package built by
/// `tools/package` takes its version from the same entry). A target of its own
/// so that a new version recompiles only this file and its two users.
public enum QoSMapVersion {
    /// The version string, such as `0.1.0`; `--version` prints it.
    public static var current: String { embeddedVersion }
}
