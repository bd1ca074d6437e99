import Foundation
package import StrataModel
import StrataStorage

extension MetaKey {
    /// Present from just before a staged migration's step migrates the store until the
    /// step's `didMigrate` handler has finished (spec 0006 §19.6): after a crash or a failed
    /// handler, the next open runs that handler again.
    static let stagedMigration = Array("stagedMigration".utf8)
}

extension EventLog {
    /// Whether `a` and `b` are one model version to a store: the same version hash and the
    /// same indexes, uniqueness constraints and renaming identifiers (spec 0004 §4), so a
    /// store that has stored one opens the other as that version, migrating nothing.
    package static func isSameVersion(_ a: ManagedObjectModel, _ b: ManagedObjectModel) -> Bool {
        a.versionHash == b.versionHash && shape(of: ModelSchema(model: a)) == shape(of: ModelSchema(model: b))
    }

    /// The stored version number that is `model` and whose migration wasn't refused (spec
    /// 0004 §4.3; the newest, if more than one is), or nil when the store hasn't stored it.
    package func storedVersion(matching model: ManagedObjectModel) throws -> Int? {
        let hash = model.versionHash
        let wanted = Self.shape(of: ModelSchema(model: model))
        for (version, json) in storedModels().reversed() {
            guard let facts = Self.storedFacts(json), facts.hash == hash, facts.shape == wanted else { continue }
            let refused = try environment.read { txn in try txn.value(forKey: MetaKey.refusedModel(version), in: tables.meta) } != nil
            if !refused { return version }
        }
        return nil
    }

    /// The pending staged-migration step a coordinator recorded (spec 0006 §19.6), nil when
    /// none is.
    package func stagedMigrationMarker() throws -> [UInt8]? {
        try environment.read { txn in try txn.value(forKey: MetaKey.stagedMigration, in: tables.meta) }
    }

    /// Records (`bytes`) or clears (nil) the pending staged-migration step.
    ///
    /// - Throws: the environment's error for a read-only log or a failed write.
    package func setStagedMigrationMarker(_ bytes: [UInt8]?) throws {
        try environment.write { txn in
            if let bytes {
                try txn.put(bytes, forKey: MetaKey.stagedMigration, in: tables.meta)
            } else {
                _ = try txn.delete(key: MetaKey.stagedMigration, in: tables.meta)
            }
        }
    }

    /// The model the head event (the last transaction) was written with, nil when the store
    /// has no event after its purge point or the head doesn't read: a staged migration's
    /// look at whether an earlier model wrote after a later one (spec 0006 §19.6).
    package func headEventModel() -> ManagedObjectModel? {
        let version = try? read { reader -> Int? in
            let head = try reader.head
            guard head > 0, head > (try reader.purgedThrough) else { return nil }
            return try reader.event(head).modelVersion
        }
        guard let number = version else { return nil }
        return try? catalog.schema(forModelVersion: number).model
    }

    /// The stored model version number whose version hash is `hash` (the newest with it),
    /// nil when the store has none: how `strata info` names a pending staged step's target.
    package func storedVersion(hash: [UInt8]) throws -> Int? {
        let bytes = try environment.read { txn in try txn.value(forKey: MetaKey.modelHash(hash), in: tables.meta) }
        return bytes.flatMap { bytes in bytes.withUnsafeBytes { readBigEndian($0, count: 4) } }.map { Int($0) }
    }
}
