// On Linux, `import FoundationModels` gives Apple's names through Plinth, so that code written
// for Apple's framework compiles unchanged.
@_exported import Plinth
