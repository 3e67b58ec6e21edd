package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/ddbsession/ddbsession"
)

// One-time codes (TOTP, RFC 6238, the six digits an authenticator app
// shows) are the second factor, after the password. They live in the user
// item, the app's own, beside the password hash:
//
//	totpSecret    S  the base32 secret of the user's authenticator app;
//	                 absent: logins need the password alone
//	totpLastStep  N  the time step (Unix time / 30 s) of the last code
//	                 accepted: a code of that step or an earlier one is
//	                 refused, so a code works once
//	totpPending   S  a secret shown for set-up, waiting for its first code
//
// A login reads them with the password hash, in ddbsession's one strongly
// consistent read, and checks the code in its verify function; a code that
// is right is then taken with a conditional write of totpLastStep, which
// requires the step to be later than the stored one, so that of two
// requests (on any instances) with one code, one succeeds.

const (
	totpIssuer = "ddbsession example"
	totpPeriod = 30 // seconds
	// totpSkew is how many steps either side of now a code may be from:
	// the phone's clock a little off, or a code typed as it changes.
	totpSkew = 1
	// methodOTP is how a session whose user typed a one-time code signed
	// in, in Session.Methods, after methodPassword.
	methodOTP = "otp"
)

var totpOpts = totp.ValidateOpts{Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// totpSecret is a TOTP secret, base32. Like passwordHash, it prints as
// "[redacted]" through fmt, templates and logs, and is left out of JSON:
// whoever has it makes the user's codes.
type totpSecret string

func (totpSecret) Format(f fmt.State, verb rune) { io.WriteString(f, "[redacted]") }

func (totpSecret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

var (
	errWrongCode = errors.New("wrong one-time code")
	// errCodeTaken is a right code that a request has already used (or
	// whose secret was changed meanwhile).
	errCodeTaken = errors.New("one-time code used already")
	// errCodeNeeded is a right password of a user whose logins need a
	// code too, which the request did not send: no failed sign-in.
	errCodeNeeded = fmt.Errorf("one-time code needed: %w", ddbsession.ErrSecondStep)
	// errNoTOTP is a code sent for a user who has none.
	errNoTOTP = errors.New("the user has no one-time codes")
	// errTOTPChanged is a set-up that another request changed meanwhile.
	errTOTPChanged = errors.New("one-time codes were changed by another request")
)

// normalizeCode returns code without the spaces that apps show in the
// middle of it, or an error fit for the user unless it is six digits.
func normalizeCode(code string) (string, error) {
	code = strings.ReplaceAll(code, " ", "")
	if len(code) != 6 || strings.ContainsFunc(code, func(r rune) bool { return r < '0' || r > '9' }) {
		return "", errors.New("the code is the six digits that the authenticator app shows")
	}
	return code, nil
}

// codeStep returns the time step around now whose code under secret is
// code, the latest if several are, and whether one is.
func codeStep(secret totpSecret, code string, now time.Time) (int64, bool) {
	current := now.Unix() / totpPeriod
	var step int64
	found := false
	for s := current - totpSkew; s <= current+totpSkew; s++ {
		want, err := totp.GenerateCodeCustom(string(secret), time.Unix(s*totpPeriod, 0), totpOpts)
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			step, found = s, true
		}
	}
	return step, found
}

// methodsFor are the methods of a sign-in that checked the password, and
// a code if one was sent.
func methodsFor(code string) []string {
	if code == "" {
		return []string{methodPassword}
	}
	return []string{methodPassword, methodOTP}
}

// secondFactor is the part of a login's verify function after the
// password: it checks code against u, the user as the login read it, if u
// has one-time codes, and then takes it. code must be "" exactly when u
// has none, so that the login's methods (methodsFor) say what was checked.
func (a *app) secondFactor(r *http.Request, user ddbsession.UserKey, u User, code string) error {
	switch {
	case !u.TOTPEnrolled() && code != "":
		return errNoTOTP
	case !u.TOTPEnrolled():
		return nil
	case code == "":
		return errCodeNeeded
	}
	step, ok := codeStep(u.TOTPSecret, code, a.now())
	switch {
	case !ok:
		return errWrongCode
	case step <= u.TOTPLastStep:
		return errCodeTaken
	}
	// Taken whatever the client does now: the code is spent either way.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), a.storeTimeout)
	defer cancel()
	return a.users.takeCodeStep(ctx, user, u.TOTPSecret, step)
}

// passwordAndCode is a login's verify function that checks the password
// with verify, and then code with secondFactor.
func (a *app) passwordAndCode(r *http.Request, user ddbsession.UserKey, verify func(User) error, code string) func(User) error {
	return func(u User) error {
		if err := verify(u); err != nil {
			return err
		}
		return a.secondFactor(r, user, u, code)
	}
}

// codeMessage is what a login answers for an error of secondFactor, and
// its status; ok is false for any other error.
func codeMessage(err error) (code int, msg string, ok bool) {
	switch {
	case errors.Is(err, errWrongCode):
		return http.StatusUnauthorized, "The code is wrong.", true
	case errors.Is(err, errCodeTaken):
		return http.StatusUnauthorized, "That code was used already: wait for the next one.", true
	case errors.Is(err, errCodeNeeded):
		return http.StatusUnauthorized, "This account needs the code from its authenticator app too.", true
	case errors.Is(err, errNoTOTP):
		return http.StatusBadRequest, "This account has no one-time codes: leave the code out.", true
	}
	return 0, "", false
}

// totpKey is the authenticator app's view of secret: the otpauth:// URL
// that the set-up's QR code holds.
func totpKey(username string, secret totpSecret) (*otp.Key, error) {
	u := url.URL{
		Scheme: "otpauth",
		Host:   "totp",
		Path:   "/" + totpIssuer + ":" + username,
		RawQuery: url.Values{
			"secret": {string(secret)}, "issuer": {totpIssuer},
			"algorithm": {"SHA1"}, "digits": {"6"}, "period": {fmt.Sprint(totpPeriod)},
		}.Encode(),
	}
	return otp.NewKeyFromURL(u.String())
}

// qrSize is the QR code's width and height, in pixels.
const qrSize = 240

// qrDataURL is the PNG of key's QR code, as pquerna/otp draws it, in a
// data: URL for the set-up page's img (its Content-Security-Policy allows
// data: images, and no others).
func qrDataURL(key *otp.Key) (template.URL, error) {
	img, err := key.Image(qrSize, qrSize)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return "", err
	}
	return template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())), nil
}

// startTOTP keeps secret as user's pending set-up, unless user has
// one-time codes already (errTOTPChanged).
func (s users) startTOTP(ctx context.Context, user ddbsession.UserKey, secret totpSecret) error {
	return s.updateTOTP(ctx, user, "SET totpPending = :secret",
		"attribute_exists(pk) AND attribute_not_exists(totpSecret)",
		map[string]types.AttributeValue{":secret": &types.AttributeValueMemberS{Value: string(secret)}})
}

// confirmTOTP turns user's pending set-up, if it is still pending, into
// the secret of the user's logins, with step, that of the code that
// confirmed it, taken.
func (s users) confirmTOTP(ctx context.Context, user ddbsession.UserKey, pending totpSecret, step int64) error {
	return s.updateTOTP(ctx, user, "SET totpSecret = :secret, totpLastStep = :step REMOVE totpPending",
		"totpPending = :secret AND attribute_not_exists(totpSecret)",
		map[string]types.AttributeValue{":secret": &types.AttributeValueMemberS{Value: string(pending)}, ":step": number(step)})
}

// removeTOTP ends user's one-time codes, and any set-up.
func (s users) removeTOTP(ctx context.Context, user ddbsession.UserKey) error {
	return s.updateTOTP(ctx, user, "REMOVE totpSecret, totpLastStep, totpPending", "attribute_exists(pk)", nil)
}

// takeCodeStep records that the code of step, under secret, is used; it
// fails with errCodeTaken if a code of that step or a later one was, or
// the secret is no longer user's.
func (s users) takeCodeStep(ctx context.Context, user ddbsession.UserKey, secret totpSecret, step int64) error {
	err := s.updateTOTP(ctx, user, "SET totpLastStep = :step",
		"totpSecret = :secret AND (attribute_not_exists(totpLastStep) OR totpLastStep < :step)",
		map[string]types.AttributeValue{":secret": &types.AttributeValueMemberS{Value: string(secret)}, ":step": number(step)})
	if errors.Is(err, errTOTPChanged) {
		return errCodeTaken
	}
	return err
}

// updateTOTP updates user's item, if condition holds; errTOTPChanged if
// not.
func (s users) updateTOTP(ctx context.Context, user ddbsession.UserKey, update, condition string, values map[string]types.AttributeValue) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       dynamoKey(user),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(condition),
		ExpressionAttributeValues: values,
	})
	if isConditionFailed(err) {
		return errTOTPChanged
	}
	return err
}
