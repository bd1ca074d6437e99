public import Foundation
import StrataModel

/// Object URIs (`Specs/0005-uri-scheme.md`): Core Data's `x-coredata://` shape with
/// Strata's scheme.
///
/// ```
/// x-strata://6F1C…-…/Player/p12     a permanent ID in the store with that UUID
/// x-strata:///Player/t8C2E…         a temporary ID (not yet saved; no store)
/// ```
public enum ObjectURI {
    /// The URI scheme.
    public static let scheme = "x-strata"

    /// The URI of a permanent object in the store `storeUUID`.
    public static func permanent(_ id: StoredObjectID, storeUUID: UUID) -> URL {
        // Entity names are identifiers (spec 0002); a non-ASCII one is percent-encoded.
        URL(string: "\(scheme)://\(storeUUID.uuidString)/\(encoded(id.entity))/p\(id.primaryKey)")
            ?? URL(fileURLWithPath: "/")
    }

    /// The URI of a temporary object.
    public static func temporary(entity: String, id: UUID) -> URL {
        URL(string: "\(scheme):///\(encoded(entity))/t\(id.uuidString)") ?? URL(fileURLWithPath: "/")
    }

    /// What a URI names, or nil when it isn't a well-formed Strata object URI.
    public enum Parsed: Sendable, Hashable {
        /// A permanent object of a store.
        case permanent(storeUUID: UUID, id: StoredObjectID)
        /// A temporary object.
        case temporary(entity: String, id: UUID)
    }

    /// Parses `uri`; nil for anything malformed: another scheme, a missing or extra path
    /// part, a bad UUID, a primary key that isn't a positive decimal number.
    public static func parse(_ uri: URL) -> Parsed? { parse(uri.absoluteString) }

    /// Parses a URI string (see ``parse(_:)-(URL)``).
    public static func parse(_ text: String) -> Parsed? {
        let prefix = "\(scheme)://"
        guard text.hasPrefix(prefix) else { return nil }
        let parts = text.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let host = String(parts[0])
        // A non-ASCII entity name is percent-encoded in the URI (as `URL` writes it).
        guard let entity = String(parts[1]).removingPercentEncoding else { return nil }
        let key = parts[2]
        guard isIdentifier(entity), let kind = key.first else { return nil }
        let rest = key.dropFirst()
        if host.isEmpty {
            guard kind == "t", let id = UUID(uuidString: String(rest)) else { return nil }
            return .temporary(entity: entity, id: id)
        }
        guard kind == "p", let store = UUID(uuidString: host), !rest.isEmpty, rest.allSatisfy(\.isASCII),
            rest.allSatisfy(\.isNumber), rest.first != "0", let pk = UInt64(rest)
        else { return nil }
        return .permanent(storeUUID: store, id: StoredObjectID(entity: entity, primaryKey: pk))
    }

    /// The permanent ID `uri` names in the store `storeUUID`; nil for another store's URI,
    /// a temporary one, or a malformed one.
    public static func storedObjectID(_ uri: URL, storeUUID: UUID) -> StoredObjectID? {
        guard case .permanent(let store, let id) = parse(uri), store == storeUUID else { return nil }
        return id
    }

    /// `name` as a URI path segment: ASCII identifiers as they are, others percent-encoded.
    static func encoded(_ name: String) -> String {
        if name.utf8.allSatisfy({ $0 < 0x80 }) { return name }
        return name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? name
    }

    /// Whether `name` can be an entity's: the model's rule for names (spec 0002), so every
    /// entity a model may have has URIs that parse back (before, this was a rule of its own —
    /// Unicode letters, then letters and digits — that refused names the model allows, such
    /// as `ⅫTeam` or `TeamⒶ`, so their objects' URIs resolved to nil and their IDs didn't decode).
    static func isIdentifier(_ name: String) -> Bool { ManagedObjectModel.isValidName(name) }
}
