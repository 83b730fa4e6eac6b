import Foundation

/// What Foundation's file errors mean, said as the system says it.
public enum FileErrors {
    /// Why a read or write failed ("No space left on device", "Permission denied"), not
    /// Foundation's error dump.
    public static func reason(_ error: any Error) -> String {
        let ns = error as NSError
        if let posix = ns.userInfo[NSUnderlyingErrorKey] as? NSError, posix.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(posix.code)))
        }
        if ns.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(ns.code))) }
        return ns.localizedFailureReason ?? ns.localizedDescription
    }
}
