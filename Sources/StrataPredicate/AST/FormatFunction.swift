internal import Foundation

// MARK: - FormatFunction

/// A built-in function callable in a format string as `name(arguments)`, matching
/// `NSExpression(forFunction:arguments:)`'s names without the colons; Core Data's spelling
/// with the colon, `lowercase:(name)`, is read as the same call.
///
/// Names are case-insensitive in the format string; the description prints the raw value.
///
/// ```swift
/// try FormatPredicate(format: "lowercase(name) == 'ada' AND creationDate < now()")
/// ```
public enum FormatFunction: String, Sendable, Hashable, CaseIterable {
    /// `now()`: the current date.
    case now
    /// `lowercase(string)`.
    case lowercase
    /// `uppercase(string)`.
    case uppercase
    /// `canonical(string)`: the string with case and diacritics folded away (`"Émile"` →
    /// `"emile"`), Core Data's `canonical:` — what `==[cd]` compares.
    case canonical
    /// `abs(number)`.
    case abs
    /// `sqrt(number)`, a `Double`.
    case sqrt
    /// `floor(number)`.
    case floor
    /// `ceiling(number)`.
    case ceiling
    /// `sum(collection)` (0 when empty).
    case sum
    /// `count(collection)`.
    case count
    /// `min(collection)` (nil when empty).
    case min
    /// `max(collection)` (nil when empty).
    case max
    /// `average(collection)` (nil when empty).
    case average
    /// `length(string)`: the number of characters.
    case length

    /// The number of arguments the function takes.
    var arity: Int { self == .now ? 0 : 1 }

    /// The function named `name`, in any case of its ASCII letters; nil for none (`ſum`, with a
    /// long s, upper-cases to `SUM` but is no function name).
    static func named(_ name: String) -> FormatFunction? {
        guard let upper = Lexer.keyword(name) else { return nil }
        return allCases.first { Lexer.keyword($0.rawValue) == upper }
    }
}

extension FormatFunction {
    /// The canonical form `canonical()` gives: `string` with case and diacritics folded
    /// (no locale), so two strings that `==[cd]` finds equal have the same canonical form.
    ///
    /// ```swift
    /// FormatFunction.canonical("Émile Zola")  // "emile zola"
    /// ```
    public static func canonical(_ string: String) -> String {
        string.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
    }
}
