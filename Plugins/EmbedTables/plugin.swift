import Foundation
import PackagePlugin

/// Compiles every YAML file under the package's `Tables/` folder into a Swift
/// source file, so the binaries need no table files installed.
@main
struct EmbedTables: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        let tables = context.package.directoryURL.appending(path: "Tables")
        var inputs: [URL] = []
        if let walker = FileManager.default.enumerator(at: tables, includingPropertiesForKeys: nil) {
            for case let url as URL in walker where url.pathExtension == "yaml" {
                inputs.append(url)
            }
        }
        inputs.sort { $0.path < $1.path }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedTables.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(inputs.count) table files from Tables/",
                executable: try context.tool(named: "qosmap-embed-tables").url,
                arguments: [output.path, tables.path] + inputs.map(\.path),
                inputFiles: inputs,
                outputFiles: [output])
        ]
    }
}
