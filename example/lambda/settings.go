package main

import (
	"errors"
	"fmt"
	"time"
)

// settings are what the function takes from its environment.
type settings struct {
	Table string
	// Zero durations take ddbsession's defaults.
	IdleTimeout, RefreshInterval, AbsoluteLifetime time.Duration
	StoreTimeout                                   time.Duration // default 2s
	Reauth                                         time.Duration // default 10m
}

// settingsFrom reads the settings from getenv (os.Getenv), and checks
// them before anything reaches AWS.
func settingsFrom(getenv func(string) string) (settings, error) {
	s := settings{Table: getenv("TABLE"), StoreTimeout: 2 * time.Second, Reauth: 10 * time.Minute}
	if s.Table == "" {
		return s, errors.New("TABLE is not set: name the DynamoDB table (template.yaml sets it)")
	}
	var errs []error
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{
		{"IDLE_TIMEOUT", &s.IdleTimeout},
		{"REFRESH_INTERVAL", &s.RefreshInterval},
		{"ABSOLUTE_LIFETIME", &s.AbsoluteLifetime},
		{"STORE_TIMEOUT", &s.StoreTimeout},
		{"REAUTH", &s.Reauth},
	} {
		v := getenv(d.name)
		if v == "" {
			continue
		}
		parsed, err := time.ParseDuration(v)
		if err != nil || parsed <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive Go duration (90s, 15m, 24h)", d.name, v))
			continue
		}
		*d.to = parsed
	}
	return s, errors.Join(errs...)
}
