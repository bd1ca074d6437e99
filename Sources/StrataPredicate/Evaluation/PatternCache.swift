internal import Foundation

// MARK: - PatternCache

/// A small lock-protected cache of compiled patterns, for patterns that are not constant in
/// the syntax tree (key paths, variables) or trees built by hand.
final class PatternCache: @unchecked Sendable {
    static let shared = PatternCache()

    private struct Key: Hashable {
        let pattern: String
        let isRegex: Bool
        let options: Int
    }

    private let lock = NSLock()
    private var matchers: [Key: PatternMatcher] = [:]
    private let capacity = 512

    func matcher(pattern: String, isRegex: Bool, options: ComparisonOptions) -> PatternMatcher {
        let key = Key(pattern: pattern, isRegex: isRegex, options: options.rawValue)
        lock.lock()
        if let cached = matchers[key] {
            lock.unlock()
            return cached
        }
        lock.unlock()
        let matcher = PatternMatcher(pattern: pattern, isRegex: isRegex, options: options)
        lock.lock()
        if matchers.count >= capacity { matchers.removeAll(keepingCapacity: true) }
        matchers[key] = matcher
        lock.unlock()
        return matcher
    }
}
