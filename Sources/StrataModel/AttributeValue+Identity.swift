// MARK: - Literal equality

extension AttributeValue {
    /// Whether this value is `other` exactly, as Core Data's `isEqual:` tells whether a set
    /// changes anything: `==`, except that strings are compared by their UTF-8 bytes rather
    /// than by canonical equivalence.
    ///
    /// Swift finds "é" precomposed (U+00E9) and decomposed ("e" U+0301) equal; `NSString`'s
    /// `isEqual:` compares UTF-16 code units and doesn't. A context, its undo journal and the
    /// log use this to decide whether a set is a change, so re-encoding stored text (an NFC
    /// normalization pass) is saved; before, it was dropped as no change. Numbers compare
    /// by value as with `==` (`-0.0` is `0.0`, as for `NSNumber`). Matching — predicates,
    /// index keys, uniqueness constraints — still takes canonically equal strings as one.
    ///
    /// ```swift
    /// AttributeValue.string("\u{E9}") == .string("e\u{301}")                  // true
    /// AttributeValue.string("\u{E9}").isIdentical(to: .string("e\u{301}"))   // false
    /// ```
    public func isIdentical(to other: AttributeValue) -> Bool {
        if case .string(let a) = self, case .string(let b) = other { return Self.sameUTF8(a, b) }
        return self == other
    }

    /// Whether two strings have the same UTF-8 bytes (no allocation; a length check first).
    static func sameUTF8(_ a: String, _ b: String) -> Bool {
        let (x, y) = (a.utf8, b.utf8)
        guard x.count == y.count else { return false }
        let contiguous = x.withContiguousStorageIfAvailable { xs in
            y.withContiguousStorageIfAvailable { ys in xs.elementsEqual(ys) }
        }
        if let result = contiguous ?? nil { return result }
        return x.elementsEqual(y)
    }
}
