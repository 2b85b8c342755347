package app

// MetricsServerOptions is metricsServer, for the external tests that start it.
var MetricsServerOptions = metricsServer
