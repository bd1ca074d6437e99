import Foundation
public import StrataModel

// MARK: - Conflict values

/// A property value in a conflict report: an attribute value, a to-one destination, or
/// to-many destinations.
public enum SnapshotValue: Sendable, Hashable, CustomStringConvertible {
    /// An attribute's value (nil: no value).
    case attribute(AttributeValue?)
    /// A to-one relationship's destination (nil: none).
    case object(ManagedObjectID?)
    /// A to-many relationship's destinations (in order when ordered; sorted otherwise).
    case objects([ManagedObjectID])

    init(_ value: PropertyValue) {
        switch value {
        case .attribute(let v): self = .attribute(v)
        case .toOne(let id): self = .object(id)
        case .toMany(let ids): self = .objects(ids)
        case .invalid(let what): self = .attribute(.string(what))
        }
    }

    /// The value as a Swift value: the attribute's value, an ID, an array of IDs, or nil.
    public var anyValue: Any? {
        switch self {
        case .attribute(let v): v?.anyValue
        case .object(let id): id
        case .objects(let ids): ids
        }
    }

    /// `"Otters"`, `nil`, an object URI, `[URI, …]`.
    public var description: String {
        switch self {
        case .attribute(let v): PropertyValue.attribute(v).text
        case .object(let id): PropertyValue.toOne(id).text
        case .objects(let ids): PropertyValue.toMany(ids).text
        }
    }
}

// MARK: - Optimistic-locking conflicts

/// An object another writer changed (or deleted) since this context read it, found when the
/// context saves its changes to it (Core Data's `NSMergeConflict`).
///
/// Versions are sequences: an object's version is the sequence of the last transaction that
/// changed its stored record.
public struct MergeConflict: Sendable, Hashable, CustomStringConvertible {
    /// One property either side changed: its value when the context read the object
    /// (`base`), the context's value now (`ours`) and the store's now (`theirs`).
    public struct PropertyConflict: Sendable, Hashable, CustomStringConvertible {
        /// The property's name.
        public let name: String
        /// The value at ``MergeConflict/oldVersion``, from the log.
        public let base: SnapshotValue
        /// The context's value.
        public let ours: SnapshotValue
        /// The store's value now (at ``MergeConflict/newVersion``).
        public let theirs: SnapshotValue

        /// Whether the context changed the property (`ours` differs from `base`).
        public var changedByContext: Bool { ours != base }
        /// Whether the other writer changed it (`theirs` differs from `base`).
        public var changedInStore: Bool { theirs != base }

        /// `name: base X, ours Y, theirs Z`.
        public var description: String { "\(name): base \(base), ours \(ours), theirs \(theirs)" }
    }

    /// The object.
    public let objectID: ManagedObjectID
    /// The version the context saw (Core Data's `oldVersionNumber`); nil when the context's
    /// values match no version in the object's history.
    public let oldVersion: UInt64?
    /// The store's version now (`newVersionNumber`); for an object deleted in the store, the
    /// sequence that deleted it.
    public let newVersion: UInt64
    /// Another writer deleted the object.
    public let isDeletedInStore: Bool
    /// This context deleted the object (unsaved).
    public let isDeletedInContext: Bool
    /// Every property either side changed since ``oldVersion``, by name.
    public let properties: [PropertyConflict]
    /// The store's values now (internal form), for the built-in policies.
    let storeValues: [String: PropertyValue]

    /// One line per conflict: object, versions, and each property's base, ours and theirs.
    public var description: String {
        let seen = oldVersion.map { "version \($0)" } ?? "an unknown version"
        var text = "\(objectID): the context saw \(seen); the store has "
            + (isDeletedInStore ? "deleted it (sequence \(newVersion))" : "version \(newVersion)")
        if isDeletedInContext { text += "; the context deletes it" }
        if !properties.isEmpty { text += "; " + properties.map(\.description).joined(separator: "; ") }
        return text
    }
}

// MARK: - Uniqueness-constraint conflicts

/// Objects that would share the values of a uniqueness constraint (Core Data's
/// `NSConstraintConflict`): several of the context's objects, and/or one already stored.
public struct ConstraintConflict: Sendable, Hashable, CustomStringConvertible {
    /// The entity that declares the constraint.
    public let entityName: String
    /// The constrained properties.
    public let constraint: [String]
    /// The shared values, in constraint order.
    public let values: [SnapshotValue]
    /// The context's objects holding them: inserted ones in insertion order, then changed ones.
    public let conflictingObjects: [ManagedObjectID]
    /// The stored object holding them (Core Data's `databaseObject`); nil when only the
    /// context's objects clash.
    public let databaseObject: ManagedObjectID?
    /// The stored object's values (Core Data's `databaseSnapshot`).
    public let databaseSnapshot: [String: SnapshotValue]?
    /// Internal forms for the built-in policies.
    let storeValues: [String: PropertyValue]?
    let storeVersion: UInt64?

    /// `Entity(email) = "a@b": objects …; stored …`.
    public var description: String {
        var text = "\(entityName)(\(constraint.joined(separator: ", "))) = \(values.map(\.description).joined(separator: ", ")): "
            + conflictingObjects.map(\.description).joined(separator: ", ")
        if let databaseObject { text += " clash with stored \(databaseObject)" } else { text += " clash with each other" }
        return text
    }
}

// MARK: - Policies

/// Resolves the conflicts a save finds (Core Data's `NSMergePolicy`; implement this protocol
/// where Core Data subclasses it).
///
/// The context calls ``resolve(optimisticLockingConflicts:in:)`` inside `save()`, on its
/// queue, before anything is written. Throw to fail the save (nothing is written); return
/// to let it go on. Whatever the policy did to the objects, the context then adopts the
/// store's current values as each object's base (keeping its changes), so the save writes
/// the objects' current values as one transaction. Uniqueness conflicts go to
/// ``resolve(constraintConflicts:in:)``; the context retries the commit after it returns.
///
/// ```swift
/// struct KeepLongerName: MergePolicy {
///     func resolve(optimisticLockingConflicts conflicts: [MergeConflict], in context: isolated ManagedObjectContext) throws {
///         try StandardMergePolicy.mergeByPropertyObjectTrump.resolve(optimisticLockingConflicts: conflicts, in: context)
///         for conflict in conflicts {
///             guard let name = conflict.properties.first(where: { $0.name == "name" }),
///                   case .attribute(.string(let theirs)?) = name.theirs,
///                   case .attribute(.string(let ours)?) = name.ours, theirs.count > ours.count else { continue }
///             context.registeredObject(for: conflict.objectID)?.setValue(theirs, forKey: "name")
///         }
///     }
/// }
/// context.mergePolicy = KeepLongerName()
/// ```
public protocol MergePolicy: Sendable {
    /// Resolves objects changed (or deleted) by another writer since the context read them,
    /// or throws (Core Data's `resolve(optimisticLockingConflicts:)`).
    func resolve(optimisticLockingConflicts conflicts: [MergeConflict], in context: isolated ManagedObjectContext) throws
    /// Resolves uniqueness-constraint clashes, or throws (`resolve(constraintConflicts:)`).
    /// The default throws ``ContextError/constraintConflicts(_:)``.
    func resolve(constraintConflicts conflicts: [ConstraintConflict], in context: isolated ManagedObjectContext) throws
}

extension MergePolicy {
    /// Refuses: throws ``ContextError/constraintConflicts(_:)``.
    public func resolve(constraintConflicts conflicts: [ConstraintConflict], in context: isolated ManagedObjectContext) throws {
        throw ContextError.constraintConflicts(conflicts)
    }
}

/// Core Data's five built-in merge policies (`NSMergePolicy(merge:)`). Custom policies call
/// them for the standard behaviour ("super") and adjust afterwards.
///
/// | policy | optimistic-locking conflict | uniqueness conflict |
/// | --- | --- | --- |
/// | ``error`` | the save throws ``ContextError/mergeConflicts(_:)``, nothing written | throws ``ContextError/constraintConflicts(_:)`` |
/// | ``mergeByPropertyStoreTrump`` | per property: the store's change wins, else the context's | upsert: the stored values win where set, the inserted object's fill the rest |
/// | ``mergeByPropertyObjectTrump`` | per property: the context's change wins, else the store's | upsert: the inserted object's values win where set |
/// | ``overwrite`` | the context's whole object is written | upsert: the inserted object's values, all of them |
/// | ``rollback`` | the context's changes to the object are dropped | upsert: the stored values, the inserted object's dropped |
///
/// `Specs/0006-context-undo.md` §17 gives the exact rules (deletions on either side, clashes
/// between the context's own objects, a changed object clashing).
public struct StandardMergePolicy: MergePolicy, Hashable {
    /// Core Data's `NSMergePolicyType`.
    public enum PolicyType: Sendable, Hashable {
        /// `errorMergePolicyType`: the save fails.
        case error
        /// `mergeByPropertyStoreTrumpMergePolicyType`: external changes win per property.
        case mergeByPropertyStoreTrump
        /// `mergeByPropertyObjectTrumpMergePolicyType`: in-memory changes win per property.
        case mergeByPropertyObjectTrump
        /// `overwriteMergePolicyType`: the in-memory object replaces the stored one.
        case overwrite
        /// `rollbackMergePolicyType`: the stored object replaces the in-memory one.
        case rollback
    }

    /// Which policy.
    public let type: PolicyType

    /// The policy of `type` (`NSMergePolicy(merge:)`).
    public init(_ type: PolicyType) { self.type = type }

    /// Applies the policy to objects changed by another writer.
    public func resolve(optimisticLockingConflicts conflicts: [MergeConflict], in context: isolated ManagedObjectContext) throws {
        if type == .error { throw ContextError.mergeConflicts(conflicts) }
        for conflict in conflicts { context.core.applyStandard(type, to: conflict) }
    }

    /// Applies the policy to uniqueness clashes.
    public func resolve(constraintConflicts conflicts: [ConstraintConflict], in context: isolated ManagedObjectContext) throws {
        if type == .error { throw ContextError.constraintConflicts(conflicts) }
        for conflict in conflicts { try context.core.applyStandard(type, to: conflict) }
    }
}

extension MergePolicy where Self == StandardMergePolicy {
    /// The default: a save with conflicts throws (`NSErrorMergePolicy`).
    public static var error: StandardMergePolicy { StandardMergePolicy(.error) }
    /// External changes trump in-memory ones, property by property (`NSMergeByPropertyStoreTrumpMergePolicy`).
    public static var mergeByPropertyStoreTrump: StandardMergePolicy { StandardMergePolicy(.mergeByPropertyStoreTrump) }
    /// In-memory changes trump external ones, property by property (`NSMergeByPropertyObjectTrumpMergePolicy`).
    public static var mergeByPropertyObjectTrump: StandardMergePolicy { StandardMergePolicy(.mergeByPropertyObjectTrump) }
    /// The in-memory object replaces the stored one (`NSOverwriteMergePolicy`).
    public static var overwrite: StandardMergePolicy { StandardMergePolicy(.overwrite) }
    /// The stored object replaces the in-memory one (`NSRollbackMergePolicy`).
    public static var rollback: StandardMergePolicy { StandardMergePolicy(.rollback) }
}
