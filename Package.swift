// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "Plinth",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "PlinthRuntime", targets: ["PlinthRuntime"]),
        .executable(name: "plinth", targets: ["plinth"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        // OpenBLAS from the system: Debian/Ubuntu `libopenblas-dev` (+ `liblapacke-dev`).
        .systemLibrary(
            name: "COpenBLAS",
            path: "Sources/COpenBLAS",
            pkgConfig: "openblas",
            providers: [.apt(["libopenblas-dev", "liblapacke-dev"]), .brew(["openblas"])]
        ),
        // Plain C kernels over raw pointers; SIMD paths are chosen at run time.
        .target(
            name: "PlinthKernels",
            dependencies: ["COpenBLAS"],
            path: "Kernels",
            cSettings: [.define("_GNU_SOURCE")]
        ),
        .target(
            name: "PlinthRuntime",
            dependencies: ["PlinthKernels"],
            path: "Sources/PlinthRuntime"
        ),
        .executableTarget(
            name: "plinth",
            dependencies: [
                "PlinthRuntime",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/plinth"
        ),
        .testTarget(
            name: "PlinthRuntimeTests",
            dependencies: ["PlinthRuntime", "PlinthKernels"],
            path: "Tests/PlinthRuntimeTests",
            resources: [.copy("Fixtures")]
        ),
    ]
)
