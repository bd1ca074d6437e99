internal import CStrataLMDB
internal import CStrataZstd
