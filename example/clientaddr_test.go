package main

import (
	"net/http/httptest"
	"net/netip"
	"slices"
	"testing"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	for _, tc := range []struct {
		name       string
		remoteAddr string
		xff        []string // X-Forwarded-For headers
		trusted    []netip.Prefix
		want       string // "" for the zero Addr
	}{
		{"IPv4", "192.0.2.1:1234", nil, nil, "192.0.2.1"},
		{"IPv6", "[2001:db8:1:2:3:4:5:6]:1234", nil, nil, "2001:db8:1:2:3:4:5:6"},
		{"IPv6 zone", "[fe80::1%eth0]:1234", nil, nil, "fe80::1"},
		{"IPv4-mapped", "[::ffff:192.0.2.1]:1234", nil, nil, "192.0.2.1"},
		{"no IP address", "@", nil, nil, ""},
		{"X-Forwarded-For ignored without trusted proxies", "192.0.2.1:1234", []string{"203.0.113.5"}, nil, "192.0.2.1"},
		// The point of the ranges: a client connecting directly writes
		// what it likes in the header, and none of it is read.
		{"a direct client's own header", "192.0.2.1:1234", []string{"203.0.113.5"}, proxies, "192.0.2.1"},
		{"a direct client naming a trusted proxy", "192.0.2.1:1234", []string{"203.0.113.5, 10.0.0.1"}, proxies, "192.0.2.1"},
		{"one proxy", "10.0.0.1:1234", []string{"203.0.113.5"}, proxies, "203.0.113.5"},
		{"one proxy, spoofed entries", "10.0.0.1:1234", []string{"1.1.1.1, 203.0.113.5"}, proxies, "203.0.113.5"},
		{"two proxies, two headers", "10.0.0.2:1234", []string{"1.1.1.1, 203.0.113.5", "10.0.0.1"}, proxies, "203.0.113.5"},
		{"two proxies, one header", "10.0.0.2:1234", []string{"1.1.1.1,203.0.113.5,10.0.0.1"}, proxies, "203.0.113.5"},
		{"IPv6 proxy", "[2001:db8:ffff::1]:1234", []string{"203.0.113.5"}, proxies, "203.0.113.5"},
		{"IPv4-mapped proxy", "[::ffff:10.0.0.1]:1234", []string{"203.0.113.5"}, proxies, "203.0.113.5"},
		{"entry with a port", "10.0.0.1:1234", []string{"203.0.113.5:5555"}, proxies, "203.0.113.5"},
		{"IPv6 entry with a port", "10.0.0.1:1234", []string{"[2001:db8::1]:5555"}, proxies, "2001:db8::1"},
		{"IPv6 entry", "10.0.0.1:1234", []string{"2001:db8::1"}, proxies, "2001:db8::1"},
		{"no header behind a proxy", "10.0.0.1:1234", nil, proxies, "10.0.0.1"},
		{"only proxies in the header", "10.0.0.2:1234", []string{"10.0.0.1"}, proxies, "10.0.0.1"},
		{"garbage where the client should be", "10.0.0.2:1234", []string{"203.0.113.5, not-an-address, 10.0.0.1"}, proxies, "10.0.0.1"},
		{"empty entry", "10.0.0.1:1234", []string{"203.0.113.5, "}, proxies, "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remoteAddr
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got := clientAddr(r, tc.trusted)
			if (tc.want == "" && got.IsValid()) || (tc.want != "" && got != netip.MustParseAddr(tc.want)) {
				t.Errorf("clientAddr = %v, want %q", got, tc.want)
			}
		})
	}
}

func TestParsePrefixes(t *testing.T) {
	t.Parallel()
	got, err := parsePrefixes("10.0.0.0/8, 192.168.1.7/16,10.1.2.3,2001:db8::/32,2001:db8::1")
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("10.1.2.3/32"),
		netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("2001:db8::1/128"),
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parsePrefixes = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "10.0.0/8", "10.0.0.0/33", "proxy.internal", "fe80::1%eth0", "::ffff:10.0.0.0/104", "10.0.0.0/8,"} {
		if got, err := parsePrefixes(bad); err == nil {
			t.Errorf("parsePrefixes(%q) = %v, want an error", bad, got)
		}
	}
}
