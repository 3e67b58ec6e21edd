package ddbtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// TTLClient is a DynamoDB client whose UpdateTimeToLive and
// DescribeTimeToLive work on engines that lack them, such as dynalite. Both
// go to the engine first; only where the engine answers
// UnknownOperationException does TTLClient keep each table's TTL setting in
// memory instead: DISABLED until an UpdateTimeToLive enables it, then
// ENABLED on that attribute. Nothing is ever deleted by the emulation: it
// only lets code that checks or enables TTL run as it would against
// DynamoDB. Every other method is the embedded client's.
//
// The emulated setting belongs to this TTLClient, and to the table as it
// was: a table deleted and created again under the same name has TTL off.
type TTLClient struct {
	*dynamodb.Client

	// emulating is set once the engine has said it lacks
	// UpdateTimeToLive; from then on DescribeTimeToLive answers from ttl.
	emulating atomic.Bool

	mu  sync.Mutex
	ttl map[string]emulatedTTL // by table ARN (or name)
}

// emulatedTTL is one table's enabled TTL.
type emulatedTTL struct {
	tableID   string // the table's identity when TTL was enabled
	attribute string
}

// WithTTL wraps c; see [TTLClient].
func WithTTL(c *dynamodb.Client) *TTLClient {
	return &TTLClient{Client: c, ttl: map[string]emulatedTTL{}}
}

// UpdateTimeToLive enables or disables TTL on the engine or, where the
// engine lacks the operation, in memory. As DynamoDB does, it answers
// ResourceNotFoundException for a missing table and ValidationException
// for enabling TTL that is already on, or disabling TTL that is off or on
// another attribute.
func (c *TTLClient) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	out, err := c.Client.UpdateTimeToLive(ctx, in, optFns...)
	if !unknownOperation(err) {
		return out, err
	}
	c.emulating.Store(true)
	// The SDK has validated the input before sending it: the table name
	// and the whole specification are there.
	const op = "UpdateTimeToLive"
	key, id, err := c.describeTable(ctx, op, in.TableName, optFns)
	if err != nil {
		return nil, err
	}
	attribute, enable := aws.ToString(in.TimeToLiveSpecification.AttributeName), aws.ToBool(in.TimeToLiveSpecification.Enabled)

	c.mu.Lock()
	defer c.mu.Unlock()
	current, on := c.current(key, id)
	switch {
	case enable && on && current.attribute == attribute:
		return nil, validationError(op, "TimeToLive is already enabled")
	case on && current.attribute != attribute:
		return nil, validationError(op, "TimeToLive is active on a different AttributeName: current AttributeName is "+current.attribute)
	case !enable && !on:
		return nil, validationError(op, "TimeToLive is already disabled")
	case enable:
		c.ttl[key] = emulatedTTL{tableID: id, attribute: attribute}
	default:
		delete(c.ttl, key)
	}
	return &dynamodb.UpdateTimeToLiveOutput{TimeToLiveSpecification: &types.TimeToLiveSpecification{
		AttributeName: aws.String(attribute),
		Enabled:       aws.Bool(enable),
	}}, nil
}

// DescribeTimeToLive describes TTL as the engine has it or, where the
// engine lacks UpdateTimeToLive, as UpdateTimeToLive left it in memory. A
// missing table is the engine's error for DescribeTable.
func (c *TTLClient) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	out, err := c.Client.DescribeTimeToLive(ctx, in, optFns...)
	if !unknownOperation(err) && (err != nil || !c.emulating.Load()) {
		return out, err
	}
	// Either the engine lacks DescribeTimeToLive, or it has it but cannot
	// have TTL on (dynalite always says DISABLED); the memory knows. The
	// SDK has validated the input: the table name is there.
	key, id, err := c.describeTable(ctx, "DescribeTimeToLive", in.TableName, optFns)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d := &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
	if current, on := c.current(key, id); on {
		d = &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusEnabled, AttributeName: aws.String(current.attribute)}
	}
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: d}, nil
}

// current returns the table's enabled TTL, if any, forgetting one that
// belonged to an earlier table of the same name. c.mu must be held.
func (c *TTLClient) current(key, tableID string) (emulatedTTL, bool) {
	current, on := c.ttl[key]
	if on && current.tableID != tableID {
		delete(c.ttl, key)
		return emulatedTTL{}, false
	}
	return current, on
}

// describeTable asks the engine for the table, and returns the key under
// which its TTL is kept and its identity. A missing table is the engine's
// own error, relabelled as operation op.
func (c *TTLClient) describeTable(ctx context.Context, op string, table *string, optFns []func(*dynamodb.Options)) (key, tableID string, err error) {
	out, err := c.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: table}, optFns...)
	if err != nil {
		var opErr *smithy.OperationError
		if errors.As(err, &opErr) {
			return "", "", &smithy.OperationError{ServiceID: opErr.ServiceID, OperationName: op, Err: opErr.Err}
		}
		return "", "", err
	}
	t := out.Table
	key = aws.ToString(t.TableArn)
	if key == "" {
		key = aws.ToString(t.TableName)
	}
	tableID = aws.ToString(t.TableId)
	if tableID == "" && t.CreationDateTime != nil {
		tableID = t.CreationDateTime.String()
	}
	return key, tableID, nil
}

// validationError is a ValidationException as the SDK reports one.
func validationError(op, message string) error {
	return &smithy.OperationError{ServiceID: dynamodb.ServiceID, OperationName: op, Err: &smithy.GenericAPIError{
		Code: "ValidationException", Message: message, Fault: smithy.FaultClient,
	}}
}

// unknownOperation reports whether err is the engine saying that it lacks
// the operation, as dynalite says of UpdateTimeToLive.
func unknownOperation(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException"
}

// SupportsTTL reports whether the engine behind client implements
// UpdateTimeToLive itself. It asks to enable TTL on a table that does not
// exist: an engine with the operation answers ResourceNotFoundException (or
// another error of its own), one without it UnknownOperationException.
// Nothing changes on the engine either way.
func SupportsTTL(ctx context.Context, client *dynamodb.Client) (bool, error) {
	_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String("ddbtest-ttl-probe-" + strings.ToLower(rand.Text())),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String("expiresAt"),
			Enabled:       aws.Bool(true),
		},
	})
	var api smithy.APIError
	switch {
	case unknownOperation(err):
		return false, nil
	case err == nil || errors.As(err, &api):
		return true, nil
	default:
		return false, fmt.Errorf("ddbtest: probe UpdateTimeToLive: %w", err)
	}
}
