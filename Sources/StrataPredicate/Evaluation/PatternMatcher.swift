internal import Foundation

// MARK: - PatternMatcher

/// A compiled `LIKE` or `MATCHES` pattern. Immutable after creation, so it is shared
/// between threads (NSRegularExpression is documented as thread-safe).
final class PatternMatcher: @unchecked Sendable {
    private enum Compiled {
        case like([LikeToken])
        case regex(NSRegularExpression)
        case invalid(String)
    }

    private enum LikeToken: Equatable {
        case literal(Character)
        case anyOne
        case anyRun
    }

    private let compiled: Compiled
    private let options: ComparisonOptions

    init(pattern: String, isRegex: Bool, options: ComparisonOptions) {
        self.options = options
        if isRegex {
            compiled = PatternMatcher.compileRegex(pattern, options: options)
        } else {
            compiled = .like(PatternMatcher.compileLike(Comparison.fold(pattern, options)))
        }
    }

    private static func compileRegex(_ pattern: String, options: ComparisonOptions) -> Compiled {
        var regexOptions: NSRegularExpression.Options = []
        if options.contains(.caseInsensitive) { regexOptions.insert(.caseInsensitive) }
        let folded = options.contains(.diacriticInsensitive) ? Comparison.fold(pattern, [.diacriticInsensitive]) : pattern
        // Check the pattern alone first: wrapping could make an unbalanced `)` valid.
        guard (try? NSRegularExpression(pattern: folded, options: regexOptions)) != nil else { return .invalid(pattern) }
        // Anchored for a whole-string match. A valid pattern may end inside a `#` comment of
        // `(?x)` mode or a `\Q` quotation, which would swallow the closing `)\z` (before, such
        // a pattern was reported invalid): a newline, whitespace in `(?x)` mode, ends the
        // comment, and `\E` the quotation. Each is tried only when the one before it doesn't
        // compile, which the pattern's own meaning never allows otherwise.
        for suffix in ["", "\n", "\\E"] {
            if let regex = try? NSRegularExpression(pattern: "\\A(?:" + folded + suffix + ")\\z", options: regexOptions) {
                return .regex(regex)
            }
        }
        return .invalid(pattern)
    }

    /// `*` matches any run, `?` one character, `\` escapes the next character.
    private static func compileLike(_ pattern: String) -> [LikeToken] {
        var tokens: [LikeToken] = []
        var escaping = false
        for character in pattern {
            if escaping {
                tokens.append(.literal(character))
                escaping = false
                continue
            }
            switch character {
            case "\\": escaping = true
            case "*": if tokens.last != .anyRun { tokens.append(.anyRun) }
            case "?": tokens.append(.anyOne)
            default: tokens.append(.literal(character))
            }
        }
        if escaping { tokens.append(.literal("\\")) }
        return tokens
    }

    /// Whether the whole of `string` matches.
    func matches(_ string: String) throws -> Bool {
        switch compiled {
        case .like(let tokens):
            return PatternMatcher.like(Array(Comparison.fold(string, options)), tokens)
        case .regex(let regex):
            let subject = options.contains(.diacriticInsensitive) ? Comparison.fold(string, [.diacriticInsensitive]) : string
            let range = NSRange(subject.startIndex..<subject.endIndex, in: subject)
            return regex.firstMatch(in: subject, options: [], range: range) != nil
        case .invalid(let pattern):
            throw PredicateEvaluationError(kind: .invalidRegularExpression,
                                           message: "MATCHES pattern \(pattern.debugDescription) is not a valid regular expression")
        }
    }

    /// Wildcard matching with backtracking to the most recent `*`: O(n·m) worst case, no
    /// recursion.
    private static func like(_ text: [Character], _ pattern: [LikeToken]) -> Bool {
        var t = 0, p = 0
        var starP = -1, starT = 0
        while t < text.count {
            if p < pattern.count {
                switch pattern[p] {
                case .anyRun:
                    starP = p
                    starT = t
                    p += 1
                    continue
                case .anyOne:
                    t += 1
                    p += 1
                    continue
                case .literal(let c) where c == text[t]:
                    t += 1
                    p += 1
                    continue
                case .literal:
                    break
                }
            }
            guard starP >= 0 else { return false }
            p = starP + 1
            starT += 1
            t = starT
        }
        while p < pattern.count, pattern[p] == .anyRun { p += 1 }
        return p == pattern.count
    }
}
