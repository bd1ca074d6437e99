/// A handful of names (an entity's property names), each found by its length first and then
/// compared with the one or two names of that length: for short names, faster than hashing
/// them or a binary search of string comparisons. Names that are the same string in memory
/// (a model's names used as keys) compare without looking at their bytes.
package struct NameLookup: Sendable {
    /// The names ordered by UTF-8 length (then by position): those of length `n` are at
    /// `lengthStarts[n]..<lengthStarts[n + 1]`, each with its position in the list given.
    /// Package-visible so that another module's hot path can walk them inline (a call to
    /// ``position(of:)`` across modules isn't inlined).
    package let names: ContiguousArray<String>
    package let positions: ContiguousArray<Int>
    package let lengthStarts: ContiguousArray<Int>

    /// A lookup of `names`, each found as its position in the array.
    package init(_ names: [String]) {
        let byLength = names.enumerated().sorted { ($0.element.utf8.count, $0.offset) < ($1.element.utf8.count, $1.offset) }
        let longest = byLength.last?.element.utf8.count ?? 0
        var starts = ContiguousArray(repeating: 0, count: longest + 2)
        for (_, name) in byLength { starts[name.utf8.count + 1] += 1 }
        for length in 0...longest { starts[length + 1] += starts[length] }
        self.names = ContiguousArray(byLength.map(\.element))
        positions = ContiguousArray(byLength.map(\.offset))
        lengthStarts = starts
    }

    /// The position of `key` in the names given, or nil.
    @inline(__always)
    package func position(of key: String) -> Int? {
        let length = key.utf8.count
        guard length + 1 < lengthStarts.count else { return nil }
        let end = lengthStarts[length + 1]
        var index = lengthStarts[length]
        while index < end {
            if names[index] == key { return positions[index] }
            index += 1
        }
        return nil
    }
}
