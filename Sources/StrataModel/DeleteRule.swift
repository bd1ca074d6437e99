// MARK: - DeleteRule

/// What happens to a relationship's destination objects when the source object is deleted.
///
/// Corresponds to Core Data's `NSDeleteRule` (`NSNullifyDeleteRule`, `NSCascadeDeleteRule`,
/// `NSDenyDeleteRule`, `NSNoActionDeleteRule`). The default, as in Core Data, is ``nullify``.
///
/// ```swift
/// Relationship("players", to: "Player", inverse: "team", toMany: true, deleteRule: .cascade)
/// ```
public enum DeleteRule: String, Sendable, Hashable, Codable, CaseIterable {
    /// Remove the deleted object from the inverse relationship of each destination object.
    case nullify
    /// Delete the destination objects too.
    case cascade
    /// Refuse the delete while any destination object exists.
    case deny
    /// Do nothing to the destination objects; the app keeps the graph consistent itself.
    case noAction
}
