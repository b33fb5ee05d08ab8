import Foundation
import PackagePlugin

/// Compiles the version of the first entry of `debian/changelog` into a Swift
/// source file, so that `qosmap --version`, `qosmapd --version` and the
/// package built by `tools/package` name one version, kept in one file.
/// `QOSMAP_CHANGELOG` names another changelog (`tools/package --changelog`,
/// which the package test uses to build a higher version without editing the
/// checkout); the path is an argument, so a different file reruns the command.
@main
struct EmbedVersion: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        let changelog =
            ProcessInfo.processInfo.environment["QOSMAP_CHANGELOG"].map { URL(fileURLWithPath: $0) }
            ?? context.package.directoryURL.appending(path: "debian/changelog")
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedVersion.swift")
        return [
            .buildCommand(
                displayName: "Embedding the version of \(changelog.lastPathComponent)",
                executable: try context.tool(named: "qosmap-embed-version").url,
                arguments: [output.path, changelog.path],
                inputFiles: [changelog],
                outputFiles: [output])
        ]
    }
}
