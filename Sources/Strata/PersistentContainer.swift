public import Foundation
public import StrataModel
import Synchronization

/// A model, a coordinator, a store and a main-queue context, set up together (Core Data's
/// `NSPersistentContainer`).
///
/// ```swift
/// let container = PersistentContainer(name: "League", managedObjectModel: model)
/// try container.loadPersistentStores()
/// try await container.viewContext.perform { context in ... }
/// ```
public final class PersistentContainer: Sendable {
    /// The container's name; the default store file is named after it.
    public let name: String
    /// The model.
    public var managedObjectModel: ManagedObjectModel { persistentStoreCoordinator.managedObjectModel }
    /// The coordinator.
    public let persistentStoreCoordinator: PersistentStoreCoordinator
    /// Where the store is; defaults to `<application support>/<name>.strata`.
    public let storeURL: URL
    /// The store's type (default: event log).
    public let storeType: PersistentStore.StoreType

    /// The main-queue context (`viewContext`), created on first use.
    public var viewContext: ManagedObjectContext {
        lazyView.withLock { view in
            if let view { return view }
            let context = ManagedObjectContext(concurrencyType: .mainQueue, coordinator: persistentStoreCoordinator)
            view = context
            return context
        }
    }
    private let lazyView = Mutex<ManagedObjectContext?>(nil)

    /// Creates a container.
    public init(
        name: String, managedObjectModel: ManagedObjectModel, storeURL: URL? = nil,
        storeType: PersistentStore.StoreType = .eventLog
    ) {
        self.name = name
        persistentStoreCoordinator = PersistentStoreCoordinator(managedObjectModel: managedObjectModel)
        self.storeType = storeType
        self.storeURL = storeURL ?? Self.defaultDirectoryURL().appendingPathComponent("\(name).strata")
    }

    /// The directory default stores go in: the user's application-support directory.
    public static func defaultDirectoryURL() -> URL {
        FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSTemporaryDirectory())
    }

    /// Opens the store (`loadPersistentStores`).
    public func loadPersistentStores() throws {
        try FileManager.default.createDirectory(at: storeURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        try persistentStoreCoordinator.addPersistentStore(type: storeType, at: storeType == .eventLog ? storeURL : nil)
    }

    /// Opens the store and calls `completionHandler` with it, or with nil and the error —
    /// Core Data's `loadPersistentStores(completionHandler:)`, whose handler gets the store's
    /// description (here the store itself: its `url` and `type`). The handler runs before
    /// this returns, as Core Data's does for a store added synchronously.
    ///
    /// ```swift
    /// container.loadPersistentStores { store, error in
    ///     if let error { print("Unresolved error \(error)") }
    /// }
    /// ```
    public func loadPersistentStores(completionHandler: (PersistentStore?, (any Error)?) -> Void) {
        do {
            try loadPersistentStores()
            completionHandler(persistentStoreCoordinator.persistentStores.first, nil)
        } catch {
            completionHandler(nil, error)
        }
    }

    /// A new private-queue context on the coordinator (`newBackgroundContext()`).
    public func newBackgroundContext() -> ManagedObjectContext {
        ManagedObjectContext(concurrencyType: .privateQueue, coordinator: persistentStoreCoordinator)
    }

    /// Runs `body` on a new background context (`performBackgroundTask`).
    public func performBackgroundTask<T: Sendable>(_ body: @Sendable (isolated ManagedObjectContext) throws -> T) async throws -> T {
        try await newBackgroundContext().perform(body)
    }
}
