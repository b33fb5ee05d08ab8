import ArgumentParser

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

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
                i == row.count - 1 ? cell : padded(cell, to: widths[i] + 2)
        }
        return line
    }.joined(separator: "\n")
}

/// `text` without leading and trailing blanks (tab and Unicode's space
/// separators, Foundation's `CharacterSet.whitespaces`).
func trimmingBlanks(_ text: some StringProtocol) -> String {
    func blank(_ s: Unicode.Scalar) -> Bool { s == "\t" || s.properties.generalCategory == .spaceSeparator }
    let scalars = text.unicodeScalars
    guard let first = scalars.firstIndex(where: { !blank($0) }),
        let last = scalars.lastIndex(where: { !blank($0) })
    else { return "" }
    var kept = String.UnicodeScalarView()
    kept.append(contentsOf: scalars[first...last])
    return String(kept)
}

/// `cell` padded with spaces (or cut) to `length` UTF-16 units, as
/// Foundation's `padding(toLength:withPad:startingAt:)` did.
func padded(_ cell: String, to length: Int) -> String {
    let units = cell.utf16.count
    if units <= length { return cell + String(repeating: " ", count: length - units) }
    return String(decoding: Array(cell.utf16.prefix(length)), as: UTF16.self)
}

/// Writes all of `text` to standard error, unbuffered as `FileHandle` (not in
/// FoundationEssentials) wrote it: `write(2)`, retried on `EINTR` and short writes.
func writeStandardError(_ text: String) {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let n = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR { continue }
        guard n > 0 else { return }
        bytes = bytes.dropFirst(n)
    }
}

/// Writes a line to standard error.
func printError(_ text: String) {
    writeStandardError(text + "\n")
}
