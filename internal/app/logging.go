package app

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// NewLogger builds the process logger: human-readable text or one JSON object per line.
func NewLogger(format, level string) (logr.Logger, error) {
	lvl, err := parseLevel(level)
	if err != nil {
		return logr.Logger{}, err
	}
	opts := []zap.Opts{zap.Level(lvl), zap.UseDevMode(false)}
	if format == "text" {
		opts = append(opts, zap.ConsoleEncoder())
	} else {
		opts = append(opts, zap.JSONEncoder())
	}
	return zap.New(opts...), nil
}

// parseLevel accepts zap's names and logr verbosities (a number N means V(N) and below).
func parseLevel(level string) (zapcore.Level, error) {
	switch strings.ToLower(level) {
	case "", "info":
		return zapcore.InfoLevel, nil
	case "debug":
		return zapcore.DebugLevel, nil
	case "warn", "warning":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	if n, err := strconv.Atoi(level); err == nil && n >= 0 && n <= 10 {
		return zapcore.Level(-n), nil
	}
	return 0, fmt.Errorf("invalid --log-level: %q (want error, warn, info, debug or 0-10)", level)
}
