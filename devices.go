package ddbsession

import (
	"errors"
	"net/http"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file recognises the browsers a user signs in from, with
// Cookie.RememberDevices, for EventNewDevice: a long-lived device cookie
// holds a random ID of the browser, no secret of any session, and the
// user's index partition an item per device, keyed by the ID's digest.

// deviceLifetime is how long the device cookie lives after each sign-in,
// and a device's item after the first: the most browsers keep a cookie.
// A device is new again once its item expires (a write in 400 days).
const deviceLifetime = 400 * 24 * time.Hour

// deviceOf returns the device ID of r's device cookie, or a new one for a
// browser without a well-formed one.
func (c *cookies) deviceOf(r *http.Request) string {
	if ck, err := r.Cookie(c.device); err == nil && item.ValidToken(ck.Value) {
		return ck.Value
	}
	return item.NewToken()
}

// setDevice sends the device cookie, for another deviceLifetime.
func (c *cookies) setDevice(w http.ResponseWriter, id string) {
	writeCookie(w, c.device, id, c.path, int(deviceLifetime/time.Second), c.secure)
}

// KnownDevice reports whether user signed in from r's browser before.
func (m *Manager[U]) KnownDevice(r *http.Request, user UserKey) (bool, error) {
	known, err := m.knownDevice(r, user)
	return known, wrap("known device", err)
}

func (c *core) knownDevice(r *http.Request, user UserKey) (bool, error) {
	if c.cookies.device == "" {
		return false, errors.New("no device cookie: Config.Cookie.RememberDevices is off")
	}
	if err := c.users.checkKey(user, true); err != nil {
		return false, err
	}
	ck, err := r.Cookie(c.cookies.device)
	if err != nil || !item.ValidToken(ck.Value) {
		return false, nil
	}
	ctx, cancel := c.storeContext(r.Context())
	defer cancel()
	if err := c.read.CheckLayout(ctx); err != nil {
		return false, err
	}
	return c.store.knowsDevice(ctx, user, deviceDigest(user, ck.Value), c.now())
}

// DeviceOf names r's browser for user as [Event.Device] does; "" for none.
func (m *Manager[U]) DeviceOf(r *http.Request, user UserKey) string {
	ck, err := r.Cookie(m.cookies.device)
	if m.cookies.device == "" || err != nil || !item.ValidToken(ck.Value) {
		return ""
	}
	return deviceDigest(user, ck.Value)
}

// deviceDigest is what keys user's item of the device whose ID is id: a
// digest of both, so that the items of one browser's users share no key
// that would tie their accounts together for a reader of the table.
func deviceDigest(user UserKey, id string) string {
	return item.Digest(user.PK + "\x00" + user.SK + "\x00" + id)
}
