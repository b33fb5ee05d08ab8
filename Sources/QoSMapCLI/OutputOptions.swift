import ArgumentParser
import Foundation

/// `--json`.
struct OutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false
}

/// Encodes a value as stable, pretty JSON (one line when `compact`).
func jsonText(_ value: some Encodable, compact: Bool = false) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting =
        compact
        ? [.sortedKeys, .withoutEscapingSlashes] : [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    // Encoding these plain structs cannot fail.
    let data = (try? encoder.encode(value)) ?? Data("null".utf8)
    return String(decoding: data, as: UTF8.self)
}

/// Pads columns for text tables.
func table(_ rows: [[String]], indent: String = "") -> String {
    guard let width = rows.map(\.count).max() else { return "" }
    var widths = [Int](repeating: 0, count: width)
    for row in rows {
        for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
    }
    return rows.map { row in
        var line = indent
        for (i, cell) in row.enumerated() {
            line +=
                i == row.count - 1 ? cell : cell.padding(toLength: widths[i] + 2, withPad: " ", startingAt: 0)
        }
        return line
    }.joined(separator: "\n")
}

/// Writes a line to standard error. A failed write is ignored: there is
/// nowhere left to report it (FileHandle's `write` would trap).
func printError(_ text: String) {
    let bytes = Array((text + "\n").utf8)
    var done = 0
    while done < bytes.count {
        let n = bytes.withUnsafeBytes { write(2, $0.baseAddress! + done, $0.count - done) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return }
        done += n
    }
}
