internal import Foundation

// MARK: - RegexSlot

/// A shared, lazily compiled `NSRegularExpression` for an attribute's pattern.
///
/// Copies of an attribute share one slot; the slot compares equal to every other slot so it
/// never affects the attribute's equality or hash. Matching holds a lock because
/// `NSRegularExpression` is not `Sendable`.
struct RegexSlot: Sendable, Hashable {
    private final class Box: @unchecked Sendable {
        let lock = NSLock()
        var pattern: String?
        var regex: NSRegularExpression?
    }
    private let box = Box()

    static func == (lhs: RegexSlot, rhs: RegexSlot) -> Bool { true }
    func hash(into hasher: inout Hasher) {}

    /// Whether `string` matches `pattern` as a whole; nil when the pattern does not compile.
    func wholeMatch(_ string: String, pattern: String) -> Bool? {
        box.lock.lock()
        defer { box.lock.unlock() }
        if box.pattern != pattern {
            box.pattern = pattern
            // The pattern must compile on its own (so `a)(b` is not rescued by the wrapper);
            // the wrapper then makes alternation match the whole string, as MATCHES does.
            box.regex =
                (try? NSRegularExpression(pattern: pattern)) == nil
                ? nil : try? NSRegularExpression(pattern: "\\A(?:" + pattern + ")\\z")
        }
        guard let regex = box.regex else { return nil }
        let range = NSRange(string.startIndex..., in: string)
        return regex.firstMatch(in: string, options: [], range: range) != nil
    }
}
