internal import Foundation

// MARK: - Comparison

/// NSPredicate's comparison semantics on runtime values.
enum Comparison {
    /// Folding options for `[c]` and `[d]`.
    static func foldingOptions(_ options: ComparisonOptions) -> String.CompareOptions {
        var folding: String.CompareOptions = []
        if options.contains(.caseInsensitive) { folding.insert(.caseInsensitive) }
        if options.contains(.diacriticInsensitive) { folding.insert(.diacriticInsensitive) }
        return folding
    }

    /// `string` with case and/or diacritics folded as `options` ask.
    ///
    /// `[c]` and `[d]` are one rule for every string operator: both strings are folded
    /// first, then compared as without options. So `'ß'`, which folds to `"ss"`, is
    /// `==[c] 'SS'`, `CONTAINS[c] 's'` and `LIKE[c] '??'` (each `?` one character of the
    /// folded string), not `LIKE[c] '?'`. Before, `==`, `<` and `CONTAINS` compared with
    /// `compare(_:options:)` and `range(of:options:)`, which don't split a character: `'ß'
    /// CONTAINS[c] 's'` was false while `'ß' BEGINSWITH[c] 's'` was true.
    static func fold(_ string: String, _ options: ComparisonOptions) -> String {
        let folding = foldingOptions(options)
        return folding.isEmpty ? string : string.folding(options: folding, locale: nil)
    }

    /// Whether `options` fold strings (`[c]` or `[d]`).
    static func folds(_ options: ComparisonOptions) -> Bool {
        options.contains(.caseInsensitive) || options.contains(.diacriticInsensitive)
    }

    // MARK: - Equality and order

    /// `==`: nil equals only nil; numbers compare across Int, Double, Decimal and Bool;
    /// strings honour `[c]`/`[d]`; collections compare element by element; objects compare
    /// by identity.
    static func equal(_ lhs: Value, _ rhs: Value, options: ComparisonOptions) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.null, _), (_, .null): return false
        case (.string(let a), .string(let b)):
            if folds(options) { return fold(a, options) == fold(b, options) }
            return a == b
        case (.date(let a), .date(let b)): return a == b
        case (.data(let a), .data(let b)): return a == b
        case (.uuid(let a), .uuid(let b)): return a == b
        case (.url(let a), .url(let b)): return a == b
        case (.collection(let a), .collection(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { equal($0, $1, options: options) }
        case (.identity, _), (.object, _), (_, .identity), (_, .object):
            guard let a = identity(lhs), let b = identity(rhs) else { return false }
            return a == b
        default:
            guard let a = Number(lhs), let b = Number(rhs) else { return false }
            return Number.compare(a, b) == .orderedSame
        }
    }

    /// What an object compares by: its predicate identity, or itself when hashable.
    private static func identity(_ value: Value) -> AnyHashable? {
        switch value {
        case .identity(let identity):
            return AnyHashable(identity)
        case .object(let object):
            if let identified = object as? any PredicateObjectIdentity {
                return AnyHashable(PredicateIdentity(identified.predicateIdentity))
            }
            return object as? AnyHashable
        default:
            return nil
        }
    }

    /// The order of two values, or nil when they cannot be ordered (nil, mixed kinds, NaN).
    static func order(_ lhs: Value, _ rhs: Value, options: ComparisonOptions) -> ComparisonResult? {
        switch (lhs, rhs) {
        case (.string(var a), .string(var b)):
            if folds(options) { (a, b) = (fold(a, options), fold(b, options)) }
            return a < b ? .orderedAscending : a == b ? .orderedSame : .orderedDescending
        case (.date(let a), .date(let b)):
            // A date whose interval is NaN is unordered, as a NaN number is (before, it
            // compared as later than every date).
            guard !a.timeIntervalSinceReferenceDate.isNaN, !b.timeIntervalSinceReferenceDate.isNaN else { return nil }
            return a < b ? .orderedAscending : a == b ? .orderedSame : .orderedDescending
        default:
            guard let a = Number(lhs), let b = Number(rhs) else { return nil }
            return Number.compare(a, b)
        }
    }

    // MARK: - Operators

    /// Applies `operatorType` to one left value (one element under ANY/ALL/NONE).
    static func evaluate(_ lhs: Value, _ comparison: ComparisonPredicate, _ rhs: Value) throws -> Bool {
        let options = comparison.options
        switch comparison.operatorType {
        case .equalTo:
            return equal(lhs, rhs, options: options)
        case .notEqualTo:
            return !equal(lhs, rhs, options: options)
        case .lessThan:
            return order(lhs, rhs, options: options) == .orderedAscending
        case .lessThanOrEqualTo:
            let result = order(lhs, rhs, options: options)
            return result == .orderedAscending || result == .orderedSame
        case .greaterThan:
            return order(lhs, rhs, options: options) == .orderedDescending
        case .greaterThanOrEqualTo:
            let result = order(lhs, rhs, options: options)
            return result == .orderedDescending || result == .orderedSame
        case .between:
            guard case .collection(let bounds) = rhs, bounds.count == 2 else {
                throw PredicateEvaluationError(
                    kind: .typeMismatch, message: "BETWEEN needs a collection of two bounds, got \(rhs.kindName)")
            }
            guard let low = order(lhs, bounds[0], options: options), let high = order(lhs, bounds[1], options: options)
            else { return false }
            return low != .orderedAscending && high != .orderedDescending
        case .in:
            // A constant collection of object identities: a lookup (equal to comparing with
            // each: an identity equals only an object or identity with the same identity).
            if let identities = comparison.rightAggregate?.identities, let key = identity(lhs) {
                return identities.contains(key)
            }
            // A constant collection of strings, compared exactly: a lookup too.
            if let strings = comparison.rightAggregate?.strings, case .string(let string) = lhs,
                !options.contains(.caseInsensitive), !options.contains(.diacriticInsensitive)
            {
                return strings.contains(string)
            }
            // A constant collection of integers, for an integer or a Boolean: a lookup too.
            if let integers = comparison.rightAggregate?.integers {
                switch lhs {
                case .int(let integer): return integers.contains(integer)
                case .bool(let flag): return integers.contains(flag ? 1 : 0)
                default: break
                }
            }
            switch rhs {
            case .collection(let elements):
                return elements.contains { equal(lhs, $0, options: options) }
            case .string(let haystack):
                guard case .string(let needle) = lhs else { return false }
                return contains(haystack, needle, options: options)
            default:
                return false
            }
        case .contains:
            switch lhs {
            case .collection(let elements):
                return elements.contains { equal($0, rhs, options: options) }
            case .string(let haystack):
                guard case .string(let needle) = rhs else { return false }
                return contains(haystack, needle, options: options)
            default:
                return false
            }
        case .beginsWith, .endsWith:
            guard case .string(let string) = lhs, case .string(let affix) = rhs, !affix.isEmpty else { return false }
            let a = fold(string, options), b = fold(affix, options)
            // An affix that folds away (a lone combining mark under [d]) is empty: it prefixes nothing.
            guard !b.isEmpty else { return false }
            return comparison.operatorType == .beginsWith ? a.hasPrefix(b) : a.hasSuffix(b)
        case .like, .matches:
            guard case .string(let string) = lhs, case .string(let pattern) = rhs else { return false }
            let matcher = comparison.matcher
                ?? PatternCache.shared.matcher(pattern: pattern, isRegex: comparison.operatorType == .matches,
                                               options: options)
            return try matcher.matches(string)
        }
    }

    /// Substring containment; the empty string is contained in nothing (as in NSPredicate,
    /// where `rangeOfString:` of an empty string finds nothing).
    static func contains(_ haystack: String, _ needle: String, options: ComparisonOptions) -> Bool {
        guard !needle.isEmpty else { return false }
        if !folds(options) { return haystack.range(of: needle) != nil }
        let folded = fold(needle, options)
        return !folded.isEmpty && fold(haystack, options).range(of: folded) != nil
    }
}
