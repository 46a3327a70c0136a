package capture

// WriteLinger is the recorder's linger, for the external tests.
const WriteLinger = writeLinger
