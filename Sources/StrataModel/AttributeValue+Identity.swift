internal import Foundation

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
    /// by value as with `==` (`-0.0` is `0.0`, as for `NSNumber`), except that NaN is NaN
    /// (any payload or sign, of one type; a date at NaN too), as `NSNumber`'s `isEqual:`
    /// finds it: before, setting NaN over NaN was a change, saved and undoable. Matching —
    /// predicates, index keys, uniqueness constraints — still takes canonically equal
    /// strings as one, and finds NaN equal to nothing.
    ///
    /// ```swift
    /// AttributeValue.string("\u{E9}") == .string("e\u{301}")                  // true
    /// AttributeValue.string("\u{E9}").isIdentical(to: .string("e\u{301}"))   // false
    /// AttributeValue.double(.nan).isIdentical(to: .double(-.nan))            // true
    /// ```
    public func isIdentical(to other: AttributeValue) -> Bool {
        switch (self, other) {
        case (.string(let a), .string(let b)): Self.sameUTF8(a, b)
        case (.double(let a), .double(let b)): a == b || (a.isNaN && b.isNaN)
        case (.float(let a), .float(let b)): a == b || (a.isNaN && b.isNaN)
        case (.date(let a), .date(let b)):
            a == b || (a.timeIntervalSinceReferenceDate.isNaN && b.timeIntervalSinceReferenceDate.isNaN)
        default: self == other
        }
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
