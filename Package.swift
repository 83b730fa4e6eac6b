// swift-tools-version: 6.1
import CompilerPluginSupport
import PackageDescription

let package = Package(
    name: "Plinth",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "PlinthRuntime", targets: ["PlinthRuntime"]),
        .library(name: "PlinthJSON", targets: ["PlinthJSON"]),
        .library(name: "PlinthGrammar", targets: ["PlinthGrammar"]),
        .library(name: "PlinthJinja", targets: ["PlinthJinja"]),
        .library(name: "Plinth", targets: ["Plinth"]),
        // Linux stand-in for Apple's framework: `import FoundationModels` re-exports Plinth.
        .library(name: "FoundationModels", targets: ["FoundationModels"]),
        .executable(name: "plinth", targets: ["plinth"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/swiftlang/swift-syntax", "600.0.0"..<"700.0.0"),
        // SHA-256 of model files (BoringSSL's, with the CPU's SHA instructions).
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        // The HTTP server of `plinth serve` (swift-configuration support left out: not used).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: ["FullFoundation"]),
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
        // The CUDA backend's kernels and driver calls: CUDA C compiled by NVRTC at first use, the
        // driver, NVRTC and cuBLAS opened with dlopen, so nothing of CUDA is needed to build.
        .target(
            name: "PlinthCUDA",
            path: "Sources/PlinthCUDA",
            exclude: ["pkc_kernels.cu"],
            linkerSettings: [.linkedLibrary("dl"), .linkedLibrary("m")]
        ),
        // JSON for every layer: one order-keeping value with number text, one reader (streamed
        // or whole), one writer (compact, indented, Python's json.dumps). No dependencies.
        .target(
            name: "PlinthJSON",
            path: "Sources/PlinthJSON"
        ),
        // A Jinja engine as transformers renders chat templates (jinja2, sandboxed, `tojson` as
        // Python writes it); general-purpose.
        .target(
            name: "PlinthJinja",
            dependencies: ["PlinthJSON"],
            path: "Sources/PlinthJinja"
        ),
        // The model manifest (Models/models.json), compiled in, and the catalog read from it.
        .target(
            name: "PlinthModels",
            dependencies: ["PlinthJSON"],
            path: "Models",
            exclude: ["templates/README.md"],
            resources: [.embedInCode("models.json"), .embedInCode("templates/gemma3.jinja")]
        ),
        .target(
            name: "PlinthRuntime",
            dependencies: ["PlinthKernels", "PlinthCUDA", "PlinthJSON", "PlinthJinja", "PlinthModels", .product(name: "Crypto", package: "swift-crypto")],
            path: "Sources/PlinthRuntime"
        ),
        // Constrained decoding: schema / JSON Schema / regex -> token masks. Knows token bytes only.
        .target(
            name: "PlinthGrammar",
            dependencies: ["PlinthJSON"],
            path: "Sources/PlinthGrammar"
        ),
        .macro(
            name: "PlinthMacros",
            dependencies: [
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
            ],
            path: "Sources/PlinthMacros"
        ),
        // The public, Apple-shaped API.
        .target(
            name: "Plinth",
            dependencies: ["PlinthRuntime", "PlinthJSON", "PlinthGrammar", "PlinthMacros"],
            path: "Sources/Plinth"
        ),
        // `plinth serve`: the OpenAI-compatible HTTP API over the schedulers of the loaded models.
        .target(
            name: "PlinthServer",
            dependencies: [
                "Plinth",
                "PlinthRuntime",
                "PlinthGrammar",
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            path: "Sources/PlinthServer"
        ),
        .target(
            name: "FoundationModels",
            dependencies: ["Plinth"],
            path: "Sources/FoundationModels"
        ),
        .executableTarget(
            name: "plinth",
            dependencies: [
                "PlinthRuntime",
                "PlinthJSON",
                "PlinthGrammar",
                "Plinth",
                "PlinthServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/plinth"
        ),
        // Mask-time benchmark of the constrained decoder against llguidance (Benchmarks/grammar).
        .executableTarget(
            name: "plinth-grammar-bench",
            dependencies: ["PlinthGrammar", "PlinthRuntime"],
            path: "Benchmarks/grammar/Bench"
        ),
        .testTarget(
            name: "PlinthRuntimeTests",
            dependencies: ["PlinthRuntime", "PlinthKernels", "PlinthJinja", "PlinthModels", "PlinthJSON"],
            path: "Tests/PlinthRuntimeTests",
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "PlinthJSONTests",
            dependencies: ["PlinthJSON"],
            path: "Tests/PlinthJSONTests"
        ),
        .testTarget(
            name: "PlinthGrammarTests",
            dependencies: ["PlinthGrammar", "PlinthRuntime"],
            path: "Tests/PlinthGrammarTests"
        ),
        .testTarget(
            name: "PlinthTests",
            dependencies: ["Plinth", "FoundationModels", "PlinthRuntime", "PlinthJSON"],
            path: "Tests/PlinthTests",
            exclude: ["PublicAPI"]
        ),
        // Sample code of Apple's Foundation Models documentation and WWDC sessions, compiled
        // against this module so that it keeps compiling (Tests/AppleDocSamplesTests/README.md).
        .testTarget(
            name: "AppleDocSamplesTests",
            dependencies: ["FoundationModels"],
            path: "Tests/AppleDocSamplesTests",
            exclude: ["README.md"]
        ),
        .testTarget(
            name: "PlinthServerTests",
            dependencies: ["PlinthServer", "Plinth", "PlinthRuntime"],
            path: "Tests/PlinthServerTests",
            // Run from its source folder by OpenAIClientTests.
            exclude: ["openai_client_check.py"]
        ),
        .testTarget(
            name: "PlinthMacrosTests",
            dependencies: [
                "PlinthMacros",
                .product(name: "SwiftSyntaxMacrosTestSupport", package: "swift-syntax"),
            ],
            path: "Tests/PlinthMacrosTests"
        ),
    ]
)
