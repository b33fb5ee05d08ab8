import Glibc

/// The running kernel's release, and the version it starts with: what a
/// datapath may rely on depends on it (the ebpf classifier's helpers, the
/// nfqueue GSO default).
public enum KernelRelease {
    /// The running kernel's release (`uname -r`), such as `6.1.0-56-amd64`.
    public static func running() -> String {
        var u = utsname()
        uname(&u)
        return withUnsafeBytes(of: u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// The major and minor version at the start of `release`, nil if it does
    /// not start with them.
    public static func version(_ release: String) -> (major: Int, minor: Int)? {
        let parts = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard parts.count == 2, release.first?.isNumber == true else { return nil }
        return (parts[0], parts[1])
    }
}
