import Foundation
import PackagePlugin

/// Compiles `Bpf/qosmap.bpf.c` with the toolchain's clang (`-target bpf`) and
/// embeds the object in a Swift source file, so that qosmapd loads its tc
/// classifier from memory and needs no file installed.
@main
struct EmbedBPF: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        let source = context.package.directoryURL.appending(path: "Bpf/qosmap.bpf.c")
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedBPF.swift")
        let object = context.pluginWorkDirectoryURL.appending(path: "qosmap.bpf.o")
        // The toolchain's own clang first (it builds BPF objects that load), then the system's.
        let clang = (try? context.tool(named: "clang").url.path) ?? "/usr/bin/clang"
        return [
            .buildCommand(
                displayName: "Compiling and embedding Bpf/qosmap.bpf.c",
                executable: try context.tool(named: "qosmap-embed-bpf").url,
                arguments: [output.path, object.path, clang, source.path],
                inputFiles: [source],
                outputFiles: [output])
        ]
    }
}
