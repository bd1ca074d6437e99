import Foundation
import StrataModel
import StrataStorage
import Synchronization

/// The store's name ↔ code tables and its model versions, cached in memory and reloaded
/// from the `catalog` and `models` tables when another process added to them.
final class Catalog: CodecCatalog, Sendable {
    struct State {
        var entityCodes: [String: UInt16] = [:]
        var entityNames: [UInt16: String] = [:]
        var relationshipCodes: [String: UInt16] = [:]
        var relationshipNames: [UInt16: String] = [:]
        var indexCodes: [String: UInt16] = [:]
        var indexNames: [UInt16: String] = [:]
        var modelJSON: [Int: Data] = [:]
        var schemas: [Int: ModelSchema] = [:]
        var versionsByHash: [Data: Int] = [:]
        /// Per kind, the highest code given by an open whose migration was refused and taken
        /// back (spec 0004 §4.3): retired, never given again.
        var codeCeilings: [Kind: UInt16] = [:]
        /// ``entityCodes`` found without hashing the name (the code at the name's position
        /// in ``entityCodeList``); made by ``indexEntityCodes()`` when the state is installed.
        /// Codes are only ever added, so a lookup made earlier can miss, never mislead.
        private(set) var entityLookup = NameLookup([])
        private(set) var entityCodeList: [UInt16] = []
        /// ``entityNames`` in an array by code (codes are small and dense), dense up to 4,096
        /// codes: decoding a reference names its entity without hashing the code.
        private(set) var entityNamesByCode: [String?] = []

        mutating func indexEntityCodes() {
            let pairs = entityCodes.sorted { $0.value < $1.value }
            entityLookup = NameLookup(pairs.map(\.key))
            entityCodeList = pairs.map(\.value)
            var names = [String?](repeating: nil, count: min(Int(entityNames.keys.max() ?? 0) + 1, 4096))
            for (code, name) in entityNames where Int(code) < names.count { names[Int(code)] = name }
            entityNamesByCode = names
        }

        /// The name of entity `code`, if this state knows it.
        @inline(__always)
        func entityName(_ code: UInt16) -> String? {
            if Int(code) < entityNamesByCode.count, let name = entityNamesByCode[Int(code)] { return name }
            return entityNames[code]
        }

        /// The code of entity `name`, if this state knows it.
        @inline(__always)
        func entityCode(_ name: String) -> UInt16? {
            if let position = entityLookup.position(of: name) { return entityCodeList[position] }
            return entityCodes[name]
        }
    }

    /// Key prefixes in the `catalog` table: name → code, and code → name.
    enum Kind: UInt8 {
        case entity = 0x65  // "e"
        case relationship = 0x72  // "r"
        case index = 0x78  // "x"
        var reverse: UInt8 { rawValue - 0x20 }  // "E", "R", "X"
    }

    /// The `catalog` key of `kind`'s retired-code ceiling: `#` and the kind's byte (an
    /// earlier Strata skips the row: neither a kind nor a reverse row).
    static func ceilingKey(_ kind: Kind) -> [UInt8] { [0x23, kind.rawValue] }

    /// A code as the catalog stores it (a code row's value, a reverse row's key after its
    /// kind byte, a ceiling row's value): two bytes, big-endian.
    static func codeBytes(_ code: UInt16) -> [UInt8] { [UInt8(code >> 8), UInt8(truncatingIfNeeded: code)] }

    /// The code a two-byte catalog value holds (nil for a value of another length).
    static func code(_ bytes: some Collection<UInt8>) -> UInt16? {
        guard bytes.count == 2, let high = bytes.first, let low = bytes.dropFirst().first else { return nil }
        return UInt16(high) << 8 | UInt16(low)
    }

    /// Raises `kind`'s retired-code ceiling (spec 0004 §4.3) to `code`, in `txn`; a ceiling
    /// at or above it stays. A ceiling row that isn't two bytes is overwritten.
    static func retire(_ kind: Kind, through code: UInt16, in txn: borrowing LMDBTransaction, tables: StoreTables) throws {
        let key = ceilingKey(kind)
        let current = try txn.value(forKey: key, in: tables.catalog).flatMap { Self.code($0) } ?? 0
        if code > current { try txn.put(codeBytes(code), forKey: key, in: tables.catalog) }
    }

    /// The codes `registered` gives that `existing` didn't: what an open's registration wrote.
    static func codesAdded(_ registered: State, over existing: State) -> [(Kind, String, UInt16)] {
        var added: [(Kind, String, UInt16)] = []
        for (name, code) in registered.entityCodes where existing.entityCodes[name] == nil { added.append((.entity, name, code)) }
        for (name, code) in registered.relationshipCodes where existing.relationshipCodes[name] == nil { added.append((.relationship, name, code)) }
        for (name, code) in registered.indexCodes where existing.indexCodes[name] == nil { added.append((.index, name, code)) }
        return added
    }

    private let state = Mutex(State())
    private let environment: LMDBEnvironment
    private let tables: StoreTables

    init(environment: LMDBEnvironment, tables: StoreTables) {
        self.environment = environment
        self.tables = tables
    }

    // MARK: - Loading

    /// Reads every table into memory (at open, and after a miss).
    func reload() throws {
        let loaded = try environment.read { txn in try load(txn) }
        state.withLock { current in
            let schemas = current.schemas
            let json = current.modelJSON
            current = loaded
            // Keep parsed schemas; they never change for a version once written with — but a
            // version taken back after a refused migration may be stored again as another
            // model (spec 0004 §4.3).
            for (version, schema) in schemas where current.modelJSON[version] != nil && current.modelJSON[version] == json[version] {
                current.schemas[version] = schema
            }
            current.indexEntityCodes()
        }
    }

    /// Reads the catalog and the stored models.
    ///
    /// - Throws: ``LogError/malformed(_:)`` for a damaged catalog: a row whose code isn't 2
    ///   bytes, two names with one code, or a name ↔ code row and its reverse (`E`/`R`/`X`)
    ///   row that disagree. Read anyway, such a catalog would file one entity's objects under
    ///   another, or (a name missing) make a writable open give an entity a new code and lose
    ///   its objects.
    func load(_ txn: borrowing LMDBTransaction) throws -> State {
        var s = State()
        var damage: String?
        var reverse: [(kind: Kind, code: UInt16, name: String)] = []
        func note(_ what: String) { if damage == nil { damage = what } }
        try txn.forEach(in: tables.catalog) { key, value in
            key.withUnsafeBytes { k in
                value.withUnsafeBytes { v in
                    guard let first = k.first else { return }
                    if first == 0x23 {
                        if k.count == 2, let kind = Kind(rawValue: k[1]), let ceiling = Self.code(v) { s.codeCeilings[kind] = ceiling }
                        return
                    }
                    let rest = UnsafeRawBufferPointer(rebasing: k[1...])
                    if let kind = Kind(rawValue: first &+ 0x20), first < 0x60 {
                        guard rest.count == 2 else { return note("a reverse \(kind) row has a key of \(k.count) bytes") }
                        reverse.append((kind, UInt16(rest[0]) << 8 | UInt16(rest[1]), String(decoding: v, as: UTF8.self)))
                        return
                    }
                    let name = String(decoding: rest, as: UTF8.self)
                    guard let kind = Kind(rawValue: first) else { return }
                    guard v.count == 2 else { return note("the \(kind) \(name)'s code is \(v.count) bytes, not 2") }
                    let code = UInt16(v[0]) << 8 | UInt16(v[1])
                    func add(_ codes: inout [String: UInt16], _ names: inout [UInt16: String]) {
                        if let other = names[code] { note("\(kind) code \(code) is given to both \(other) and \(name)") }
                        codes[name] = code
                        names[code] = name
                    }
                    switch kind {
                    case .entity: add(&s.entityCodes, &s.entityNames)
                    case .relationship: add(&s.relationshipCodes, &s.relationshipNames)
                    case .index: add(&s.indexCodes, &s.indexNames)
                    }
                }
            }
            return .next
        }
        for (kind, code, name) in reverse {
            let forward: String? =
                switch kind {
                case .entity: s.entityNames[code]
                case .relationship: s.relationshipNames[code]
                case .index: s.indexNames[code]
                }
            if forward != name {
                note("\(kind) code \(code) names \(name.debugDescription), but " + (forward.map { "\($0.debugDescription) has that code" } ?? "no \(kind) has that code"))
            }
        }
        if let damage { throw LogError.malformed("the catalog is damaged: \(damage)") }
        try txn.forEach(in: tables.models) { key, value in
            let version = key.withUnsafeBytes { k in k.reduce(0) { $0 << 8 | Int($1) } }
            s.modelJSON[version] = value.withUnsafeBytes { Data($0) }
            return .next
        }
        return s
    }

    // MARK: - Registering (inside a write transaction)

    /// Gives every entity, recorded relationship and index of `schema` a code, writing new
    /// ones to the catalog table. Returns the codes as they will be after commit.
    static func register(_ schema: ModelSchema, in txn: borrowing LMDBTransaction, tables: StoreTables, existing: State)
        throws -> State
    {
        var s = existing
        let ceilings = existing.codeCeilings
        func assign(_ name: String, _ kind: Kind, _ codes: inout [String: UInt16], _ names: inout [UInt16: String]) throws {
            guard codes[name] == nil else { return }
            let next = max(names.keys.max() ?? 0, ceilings[kind] ?? 0) &+ 1
            guard next != 0 else { throw LogError.invalidOperation("the store has run out of \(kind) codes") }
            codes[name] = next
            names[next] = name
            var nameKey = [kind.rawValue]
            nameKey.append(contentsOf: Array(name.utf8))
            let codeBytes = Self.codeBytes(next)
            try txn.put(codeBytes, forKey: nameKey, in: tables.catalog)
            try txn.put(Array(name.utf8), forKey: [kind.reverse] + codeBytes, in: tables.catalog)
        }
        for name in schema.entities.keys.sorted() { try assign(name, .entity, &s.entityCodes, &s.entityNames) }
        for name in schema.recordedRelationships {
            try assign(name, .relationship, &s.relationshipCodes, &s.relationshipNames)
        }
        for index in schema.indexes { try assign(index.name, .index, &s.indexCodes, &s.indexNames) }
        return s
    }

    func replace(with new: State) {
        var new = new
        new.indexEntityCodes()
        state.withLock { [new] in $0 = new }
    }

    var snapshot: State { state.withLock { $0 } }

    // MARK: - Lookups

    private func lookup<T>(_ body: (State) -> T?) -> T? {
        if let found = state.withLock({ body($0) }) { return found }
        // Another process may have added it since we loaded.
        try? reload()
        return state.withLock { body($0) }
    }

    func entityCode(_ name: String) throws(LogError) -> UInt16 {
        guard let code = lookup({ $0.entityCode(name) }) else { throw .unknownEntity(name) }
        return code
    }

    func entityName(_ code: UInt16) throws(LogError) -> String {
        guard let name = lookup({ $0.entityNames[code] }) else { throw .malformed("unknown entity code \(code)") }
        return name
    }

    func relationshipCode(_ qualifiedName: String) throws(LogError) -> UInt16 {
        guard let code = lookup({ $0.relationshipCodes[qualifiedName] }) else {
            throw .malformed("relationship \(qualifiedName) has no code in the catalog")
        }
        return code
    }

    func relationshipName(_ code: UInt16) -> String? { lookup { $0.relationshipNames[code] } }

    func indexCode(_ name: String) throws(LogError) -> UInt16 {
        guard let code = lookup({ $0.indexCodes[name] }) else { throw .malformed("index \(name) has no code in the catalog") }
        return code
    }

    func indexName(_ code: UInt16) -> String? { lookup { $0.indexNames[code] } }

    func schema(forModelVersion version: Int) throws(LogError) -> ModelSchema {
        if let schema = state.withLock({ $0.schemas[version] }) { return schema }
        // The JSON is read afresh before a version is first parsed: one loaded while an open
        // whose migration was refused had it stored may have been taken back, and its number
        // given to another model since (spec 0004 §4.3).
        try? reload()
        guard let json = lookup({ $0.modelJSON[version] }) else {
            throw .malformed("model version \(version) is not stored in this store")
        }
        let model: ManagedObjectModel
        do {
            model = try ManagedObjectModel(jsonData: json)
        } catch {
            throw .malformed("stored model version \(version) does not load: \(error)")
        }
        let schema = ModelSchema(model: model)
        state.withLock { $0.schemas[version] = schema }
        return schema
    }

    /// The stored model versions, oldest first.
    var modelVersions: [Int] { state.withLock { $0.modelJSON.keys.sorted() } }

    /// The newest stored model version (no array built: read at every commit).
    var newestModelVersion: Int? { state.withLock { $0.modelJSON.keys.max() } }

    func modelJSON(version: Int) -> Data? { lookup { $0.modelJSON[version] } }
}
