package main

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// clientAddr returns the address of the client that r counts against in
// the per-address limits, or the zero Addr if r.RemoteAddr is no IP
// address (a Unix socket).
//
// It is the connection's address, unless that address is in one of the
// trusted proxy ranges: then the client is in X-Forwarded-For, to which
// each proxy appends the address it was connected from. The entries are
// read from the right, skipping those in trusted ranges (the proxies
// passing the request on to each other), and the first untrusted one is
// the client, written by a proxy of ours. Entries to its left are the
// client's own to write, so they are never read; nor is the header of a
// request whose connection does not come from a trusted proxy, since any
// client can send it. Where the header runs out, or holds something that
// is no address, the last trusted hop is what is known, and the request
// counts against it: a misconfigured proxy can then throttle everyone
// behind it, but no client can choose its own bucket.
func clientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	client, ok := parseHost(r.RemoteAddr)
	if !ok {
		return netip.Addr{}
	}
	if !isTrusted(client, trusted) {
		return client
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop, ok := parseHost(strings.TrimSpace(hops[i]))
		if !ok {
			break
		}
		client = hop
		if !isTrusted(hop, trusted) {
			break
		}
	}
	return client
}

// clientRemoteAddr sets the RemoteAddr of each request that comes from a
// trusted proxy to its client's address (clientAddr), for everything behind
// it: ddbsession records a session's RemoteAddr as the address it signed in
// from and was last seen at. A request from any other peer passes as it is,
// its X-Forwarded-For unread, whatever it claims.
func clientRemoteAddr(next http.Handler, trusted []netip.Prefix) http.Handler {
	if len(trusted) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if peer, ok := parseHost(r.RemoteAddr); ok && isTrusted(peer, trusted) {
			r = r.WithContext(r.Context()) // a copy, which the caller does not see
			r.RemoteAddr = netip.AddrPortFrom(clientAddr(r, trusted), 0).String()
		}
		next.ServeHTTP(w, r)
	})
}

// parseHost reads an address as RemoteAddr or an X-Forwarded-For entry
// holds it: "192.0.2.1", "192.0.2.1:1234", "2001:db8::1" or
// "[2001:db8::1]:1234" (some proxies add the port). IPv4-mapped IPv6
// addresses come back as IPv4, and zones are dropped, so that one client
// has one form.
func parseHost(s string) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(s)
	if err != nil {
		host, _, splitErr := net.SplitHostPort(s)
		if splitErr != nil {
			return netip.Addr{}, false
		}
		if addr, err = netip.ParseAddr(host); err != nil {
			return netip.Addr{}, false
		}
	}
	return addr.Unmap().WithZone(""), true
}

func isTrusted(addr netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// parsePrefixes reads a comma-separated list of address ranges, as
// -trusted-proxies takes it: "10.0.0.0/8,192.168.0.0/16", or single
// addresses ("10.0.0.1", "2001:db8::1").
func parsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for s := range strings.SplitSeq(list, ",") {
		s = strings.TrimSpace(s)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			addr, addrErr := netip.ParseAddr(s)
			if addrErr != nil || addr.Zone() != "" {
				return nil, fmt.Errorf("%q is neither an address range (10.0.0.0/8) nor an address", s)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		if p.Addr().Is4In6() {
			// Addresses are compared unmapped (see parseHost).
			return nil, fmt.Errorf("%q is an IPv4-mapped range: write it as IPv4", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
