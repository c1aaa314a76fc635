package sse

// MaxKeptBuffer is maxKeptBuffer, for the external tests.
const MaxKeptBuffer = maxKeptBuffer
